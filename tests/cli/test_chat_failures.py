"""`pressloop chat` when the model fails (issue 14, finding 4): the error is printed once, the
run is not left queued behind the person, and Pressloop says so in the thread."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.cli.conftest import Pressloop

THREAD_ID = re.compile(r"thr_[0-9a-f]{28}")
CANCELLED = (
    "This run was cancelled instead of being retried: the model provider did not answer "
    "(HTTP 500). No action had run. Send the message again to try once more."
)


async def test_a_provider_500_is_said_once_and_the_run_is_not_left_queued(
    pressloop: Pressloop, tmp_path: Path
) -> None:
    script = tmp_path / "down.json"
    failure = {"error": {"status": 500, "message": "the model is down"}}
    script.write_text(json.dumps([failure]), encoding="utf-8")
    chat = await pressloop("chat", "hello", env={"PRESSLOOP_SCRIPT": str(script)})
    shown = chat.out + chat.err
    assert chat.code == 1, shown
    assert shown.count("the model is down") == 1, shown
    assert f"Pressloop: {CANCELLED}" in " ".join(shown.split()), shown
    assert "queued" not in shown and "Traceback" not in shown
    (thread_id,) = set(THREAD_ID.findall(chat.out))

    runs = await pressloop("runs", "list", "--thread", thread_id)
    assert "cancelled" in runs.out and "queued" not in runs.out
    thread = await pressloop("threads", "show", thread_id)
    lines = [" ".join(line.split()) for line in thread.out.splitlines()]
    assert f"pressloop {CANCELLED}" in lines, thread.out

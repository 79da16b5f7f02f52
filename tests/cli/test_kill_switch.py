"""`pressloop chat` with the kill switch on: a non-zero exit with the reason, nothing stored."""

from __future__ import annotations

from tests.cli.conftest import Pressloop


async def test_chat_refuses_with_the_reason_and_stores_nothing(pressloop: Pressloop) -> None:
    refused = await pressloop("chat", "hello", env={"PRESSLOOP_DISABLE_AGENT": "1"})
    assert refused.code == 1
    assert "the agent is disabled" in refused.err and "PRESSLOOP_DISABLE_AGENT" in refused.err
    assert "Traceback" not in refused.out + refused.err

    threads = await pressloop("threads", "list")
    runs = await pressloop("runs", "list")
    assert threads.code == 0 and "thr_" not in threads.out  # not even a thread
    assert runs.code == 0 and "run_" not in runs.out

    allowed = await pressloop("chat", "hello")
    assert allowed.code == 0, allowed.err

"""`pressloop approvals` shows what will run and who asked (issue 14, finding 7): the edited params
that run, the agent's own, the person and the trigger, and what became of the step; edited params
that do not fit the action are refused when approving, and the approval stays pending."""

from __future__ import annotations

import getpass
import json
from pathlib import Path

from tests.cli.conftest import Pressloop
from tests.support.processes import pack_env


async def test_approvals_show_the_edited_params_that_run_and_who_asked(
    pressloop: Pressloop, tmp_path: Path
) -> None:
    script = tmp_path / "delete.json"
    script.write_text(
        json.dumps([{"tool_calls": [{"name": "delete_user", "arguments": {"login": "bob"}}]}])
    )
    effects = tmp_path / "effects.txt"
    env = pack_env("approval_pack", script, effects)
    chat = await pressloop("chat", "delete user bob", env=env)
    assert chat.code == 0 and "waiting_approval" in chat.out, chat.err
    listed = await pressloop("approvals", "list", "--status", "pending", env=env)
    approval_id = next(w for w in listed.out.split() if w.startswith("apr_"))
    me = getpass.getuser()
    assert f"{me} (chat)" in listed.out  # the person, and the trigger

    wrong = await pressloop(
        "approvals", "approve", approval_id, "--params", '{"user": "carol"}', env=env
    )
    assert wrong.code == 2 and "edited params for delete_user are invalid" in wrong.err
    assert "login" in wrong.err and not effects.exists()
    still = await pressloop("approvals", "list", "--status", "pending", env=env)
    assert approval_id in still.out

    rest = tmp_path / "rest.json"
    rest.write_text(json.dumps([{"text": "Carol is gone."}]))
    env["PRESSLOOP_SCRIPT"] = str(rest)
    approved = await pressloop(
        "approvals", "approve", approval_id, "--params", '{"login": "carol"}', env=env
    )
    assert approved.code == 0 and "succeeded" in approved.out, approved.err
    assert effects.read_text() == "deleted carol\n"

    history = await pressloop("approvals", "list", env=env)
    row = next(line for line in history.out.splitlines() if approval_id in line)
    assert "edited:" in row and "carol" in row and "bob" not in row  # what ran
    assert f"{me} (chat)" in row and "ran" in row
    shown = await pressloop("approvals", "show", approval_id, env=env)
    assert f"asked by {me} (chat)" in shown.out
    assert "step ran: deleted carol" in shown.out
    runs_with, _, asked_for = shown.out.partition("the agent asked for")
    assert f"runs with (edited by {me})" in runs_with and '"carol"' in runs_with
    assert '"bob"' in asked_for

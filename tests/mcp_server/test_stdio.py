"""MCP over stdio: `pressloop mcp` started by the official client's `stdio_client`, acting as the
local user, as a desktop or IDE agent starts it."""

from __future__ import annotations

import getpass
import json
from pathlib import Path

from tests.mcp_server.conftest import (
    ANSWER,
    approval_id_of,
    resource_json,
    stdio_session,
    structured,
    text,
    write_env,
)


async def test_an_admin_chats_acts_and_approves_over_stdio(tmp_path: Path) -> None:
    env, effects = write_env(tmp_path)
    note = "Posts go out on Tuesdays."
    async with stdio_session(env, tmp_path, "--role", "admin") as mcp:
        tools = {t.name: t for t in (await mcp.list_tools()).tools}
        assert {"chat", "list_approvals", "approve", "reject", "remember", "recall"} <= set(tools)
        assert "delete_user" in tools
        destructive = tools["delete_user"].annotations
        assert destructive is not None and destructive.destructive_hint is True
        recall = tools["recall"].annotations
        assert recall is not None and recall.read_only_hint is True

        chatted = await mcp.call_tool("chat", {"message": "Hello?"})
        assert not chatted.is_error and text(chatted) == ANSWER

        waiting = await mcp.call_tool("remember", {"content": note})
        approval_id = approval_id_of(waiting)
        run_id = structured(waiting)["run_id"]
        approved = await mcp.call_tool("approve", {"approval_id": approval_id})
        assert not approved.is_error, approved
        assert text(approved).startswith(f"approved {approval_id}; the run: ")
        assert structured(approved)["status"] == "succeeded"
        assert structured(approved)["run_id"] == run_id

        found = await mcp.call_tool("recall", {"query": "Tuesdays"})
        assert not found.is_error and note in text(found)
        run = resource_json(await mcp.read_resource(f"pressloop://runs/{run_id}"))
        assert isinstance(run, dict)
        assert run["status"] == "succeeded" and run["requesting_user"] == getpass.getuser()
        assert run["trigger"] == "mcp"
    assert not effects.exists()  # nothing called delete_user


async def test_the_default_role_is_operator_which_may_not_decide(tmp_path: Path) -> None:
    env, effects = write_env(tmp_path)
    async with stdio_session(env, tmp_path) as mcp:
        waiting = await mcp.call_tool("delete_user", {"login": "eve"})
        approval_id = approval_id_of(waiting)
        for tool in ("approve", "reject"):
            refused = await mcp.call_tool(tool, {"approval_id": approval_id})
            assert refused.is_error and "needs an admin token" in text(refused)
        pending = await mcp.call_tool("list_approvals", {})
        assert [a["id"] for a in structured(pending)["approvals"]] == [approval_id]
    assert not effects.exists()


async def test_a_turn_longer_than_the_wait_is_still_running(tmp_path: Path) -> None:
    env, _effects = write_env(tmp_path)
    slow = tmp_path / "slow.json"
    slow.write_text(json.dumps([{"text": "late", "delay_s": 30}]))
    env = {**env, "PRESSLOOP_SCRIPT": str(slow), "PRESSLOOP_MCP_CALL_WAIT": "0.5"}
    async with stdio_session(env, tmp_path) as mcp:
        running = await mcp.call_tool("chat", {"message": "Take your time."})
        assert not running.is_error, running
        run_id = structured(running)["run_id"]
        assert text(running) == f"still running: run {run_id} (running)"
        assert structured(running)["status"] == "running"

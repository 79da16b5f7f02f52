"""Outside MCP servers' tools in real turns (`runtime/mcp_tools.py`), on both databases: the
toolbox server (tests/mcp/servers/toolbox.py, written with the `mcp` SDK) over stdio, configured
by the data directory's mcp.json and by the stored settings."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from pressloop.contracts import RunStatus, StepStatus, Trigger
from pressloop.errors import Conflict
from pressloop.runtime.service import Service
from pressloop.store import settings_repo
from tests.conftest import FakeClock
from tests.mcp.support import TOOLBOX
from tests.runtime.conftest import ServiceFactory
from tests.support.actions import Notebook, call


def toolbox(**extra: object) -> dict[str, object]:
    return {"command": sys.executable, "args": [str(TOOLBOX), "stdio"], **extra}


def write_config(data_dir: Path, **servers: dict[str, object]) -> None:
    (data_dir / "mcp.json").write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")


async def turn(service: Service, message: str, *, thread_id: str | None = None, **kw: object):
    if thread_id is None:
        thread_id = (await service.create_thread()).id
    run = (await service.submit(thread_id, message, **kw)).run  # type: ignore[arg-type]
    done = await service.run_now(run.id)
    assert done is not None
    return done


def system_prompt(service: Service, index: int = 0) -> str:
    return service.scripted.requests[index].system  # type: ignore[attr-defined]


async def test_a_chat_turn_calls_a_read_tool_and_the_prompt_lists_the_servers_tools(
    make_service: ServiceFactory, tmp_path: Path
) -> None:
    write_config(tmp_path, box=toolbox())
    service = await make_service(
        [call("box.lookup", term="plugins", limit=2), {"text": "Found them."}]
    )
    done = await turn(service, "look plugins up")
    assert done.status is RunStatus.SUCCEEDED, done.error
    step = done.result.steps[0]
    assert step.action == "box.lookup" and step.status is StepStatus.SUCCEEDED
    assert step.risk is not None and step.risk.value == "read"
    told = service.scripted.requests[1].messages[-1].content  # type: ignore[attr-defined]
    assert "found plugins x2" in told and "UNTRUSTED" in told
    assert done.result.untrusted  # the turn read content others wrote

    prompt = system_prompt(service)
    action_catalog, mcp_catalog = prompt.split("## MCP_TOOL_CATALOG")
    assert "box.lookup" not in action_catalog  # the stable part stays the same
    assert "- box.lookup (risk: read): Look a term up. (MCP server box)" in mcp_catalog
    assert "- box.purge (risk: destructive)" in mcp_catalog
    assert "- box.note (risk: write)" in mcp_catalog
    catalog = {entry.name: entry for entry in service.registry.catalog()}
    assert catalog["box.lookup"].server == "box"
    assert catalog["box.lookup"].params_schema["required"] == ["term"]


async def test_a_destructive_tool_waits_for_approval_then_runs_once(
    make_service: ServiceFactory, tmp_path: Path
) -> None:
    write_config(tmp_path, box=toolbox(tools={"note": "off"}))
    service = await make_service(
        [call("box.purge", target="cache"), {"text": "Purged."}, {"text": "again"}]
    )
    paused = await turn(service, "purge the cache")
    assert paused.status is RunStatus.WAITING_APPROVAL
    (approval,) = await service.approvals.find(status="pending")
    assert approval.action == "box.purge" and approval.risk == "destructive"
    assert "box.note" not in service.registry.names()  # the owner turned it off

    await service.decide(approval.id, approve=True, by="owner")
    done = await service.run_now(paused.id)
    assert done is not None and done.status is RunStatus.SUCCEEDED
    (step,) = [s for s in done.result.steps if s.status is StepStatus.SUCCEEDED]
    assert step.action == "box.purge" and step.approval_id == approval.id
    ledger = await service.ledger(done.id)
    assert [(e.action, e.status) for e in ledger] == [("box.purge", "done")]
    told = service.scripted.requests[1].messages[-1].content  # type: ignore[attr-defined]
    assert "purged cache" in told
    with pytest.raises(Conflict, match="tool of the MCP server box: what it did cannot be undone"):
        await service.undo(ledger[0].id, by="owner")


async def test_after_a_tools_result_a_destructive_action_needs_a_person_whatever_the_policy(
    make_service: ServiceFactory, tmp_path: Path
) -> None:
    write_config(tmp_path, box=toolbox())
    notebook = Notebook()
    service = await make_service(
        [call("box.lookup", term="x"), call("wipe", text="all"), {"text": "asked"}]
    )
    for spec in notebook.specs():
        service.registry.register(spec)
    thread = await service.create_thread(metadata={"policy": {"destructive": "allow"}})
    paused = await turn(service, "look up then wipe", thread_id=thread.id)
    assert paused.status is RunStatus.WAITING_APPROVAL  # tainted by the MCP result
    (approval,) = await service.approvals.find(status="pending")
    assert approval.action == "wipe" and notebook.notes == []


async def test_a_server_killed_mid_call_is_a_clear_failed_step_and_the_next_turn_has_it_again(
    make_service: ServiceFactory, tmp_path: Path
) -> None:
    write_config(tmp_path, box=toolbox())
    service = await make_service(
        [
            call("box.crash"),
            {"text": "The tool broke."},
            call("box.lookup", term="y"),
            {"text": "ok"},
        ],
        mcp_restart_base_s=0.01,
        mcp_restart_cap_s=0.02,
    )
    broken = await turn(service, "crash it")
    assert broken.status is RunStatus.SUCCEEDED  # the model was told and answered
    step = broken.result.steps[0]
    assert step.status is StepStatus.FAILED
    told = service.scripted.requests[1].messages[-1].content  # type: ignore[attr-defined]
    assert "MCP server 'box'" in told and "cut short" in told
    again = await turn(service, "look y up")
    assert again.result.steps[0].status is StepStatus.SUCCEEDED
    assert service.mcp_tools.connections["box"].starts == 2


async def test_a_tool_list_change_is_seen_without_a_restart(
    make_service: ServiceFactory, tmp_path: Path
) -> None:
    write_config(tmp_path, box=toolbox())
    service = await make_service(
        [
            {"tool_calls": [{"name": "box.grow", "arguments": {"name": "sprout"}}]},
            {"text": "grown"},
            call("box.sprout"),
            {"text": "hi"},
        ],
        mcp_config_poll_s=0,
    )
    thread = await service.create_thread(metadata={"policy": {"write": "allow"}})
    await turn(service, "grow", thread_id=thread.id)
    assert "box.sprout" not in service.scripted.requests[0].system  # type: ignore[attr-defined]
    done = await turn(service, "call sprout", thread_id=thread.id)
    assert done.result.steps[-1].action == "box.sprout"
    assert done.result.steps[-1].status is StepStatus.SUCCEEDED
    assert "- box.sprout (risk: write)" in system_prompt(service, 2)


async def test_stored_servers_come_and_go_and_one_down_costs_its_tools_not_the_turn(
    make_service: ServiceFactory, tmp_path: Path, clock: FakeClock
) -> None:
    service = await make_service(
        [{"text": "one"}, {"text": "two"}, {"text": "three"}], mcp_config_poll_s=0
    )
    stored = {
        "mcpServers": {
            "box": toolbox(),
            "gone": {"command": str(tmp_path / "no-such-server"), "timeout_s": 5},
        }
    }
    async with service.database.write() as conn:
        await settings_repo.set_setting(conn, "mcp_servers", stored, now=clock())
    done = await turn(service, "hello")
    assert done.status is RunStatus.SUCCEEDED
    prompt = system_prompt(service)
    assert "- box.lookup (risk: read)" in prompt
    assert "MCP server 'gone': could not be started: No such file" in prompt
    assert "(its tools are not offered now)" in prompt

    async with service.database.write() as conn:
        await settings_repo.set_setting(conn, "mcp_servers", {"mcpServers": {}}, now=clock())
    await turn(service, "hello again")
    assert "MCP_TOOL_CATALOG" not in system_prompt(service, 1)
    assert not [n for n in service.registry.names() if n.startswith("box.")]
    assert service.mcp_tools.connections == {}


async def test_an_mcp_client_calls_an_outside_tool_directly(
    make_service: ServiceFactory, tmp_path: Path
) -> None:
    write_config(tmp_path, box=toolbox())
    service = await make_service([])
    submission = await service.call_action(
        "box.lookup", {"term": "z"}, user="ide", trigger=Trigger.MCP
    )
    assert submission.started is not None
    run = await submission.started
    assert run is not None and run.status is RunStatus.SUCCEEDED
    assert run.result is not None and "found z x3" in run.result.assistant_text


async def test_a_slow_starting_server_does_not_hold_the_turn_and_its_tools_come_later(
    make_service: ServiceFactory, tmp_path: Path
) -> None:
    slow = {"command": "sh", "args": ["-c", f"sleep 3; exec {sys.executable} {TOOLBOX} stdio"]}
    write_config(tmp_path, slow=slow)
    service = await make_service(
        [{"text": "one"}, {"text": "two"}], mcp_list_wait_s=0.2, mcp_config_poll_s=0
    )
    thread = await service.create_thread()
    await turn(service, "hello", thread_id=thread.id)
    assert "MCP server 'slow' is starting: its tools come later" in system_prompt(service)
    await asyncio.sleep(6)
    await turn(service, "hello again", thread_id=thread.id)
    assert "- slow.lookup (risk: read)" in system_prompt(service, 1)
    assert "is starting" not in system_prompt(service, 1)

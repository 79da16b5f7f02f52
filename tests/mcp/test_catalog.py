"""MCP tools as actions (`pressloop/mcp/catalog.py`): names, risks from hints and the owner's
overrides, the tool's own schema checked by its own draft, tools that run only as tasks left
out, and calls through a real `Executor` over a real `Registry`."""

from __future__ import annotations

from collections.abc import AsyncIterator

import jsonschema  # type: ignore[import-untyped]
import pytest
from mcp import types as mcp_types
from pydantic import ValidationError

from pressloop.actions.executor import Executor
from pressloop.actions.registry import Registry
from pressloop.contracts import (
    ActionCall,
    ActionContext,
    Policy,
    PolicyMode,
    Risk,
    StepStatus,
    Trigger,
)
from pressloop.mcp.catalog import catalog_specs_and_errors, server_specs, tool_spec
from pressloop.mcp.config import server_config
from pressloop.mcp.connection import McpConnection
from tests.mcp.support import TOKEN, stdio_toolbox
from tests.support.ledger import MemoryLedger

OPEN = Policy(write=PolicyMode.ALLOW, destructive=PolicyMode.ALLOW)


def context() -> ActionContext:
    return ActionContext(
        run_id="run_1", thread_id="thr_1", trigger=Trigger.CHAT, step_index=1, policy=OPEN
    )


@pytest.fixture
async def box() -> AsyncIterator[McpConnection]:
    connection = McpConnection(
        stdio_toolbox(timeout_s=10, tools={"note": "destructive", "whoami": "off"})
    )
    yield connection
    await connection.close()


async def test_tools_become_actions_named_and_risked_as_said(box: McpConnection) -> None:
    specs = {spec.name: spec for spec in await server_specs(box)}
    assert specs["box.lookup"].risk is Risk.READ  # readOnlyHint
    assert specs["box.purge"].risk is Risk.DESTRUCTIVE  # destructiveHint
    assert specs["box.grow"].risk is Risk.WRITE  # no hint
    assert specs["box.note"].risk is Risk.DESTRUCTIVE  # the owner's word for the tool
    assert "box.whoami" not in specs  # off
    assert all(spec.untrusted_output for spec in specs.values())
    entry = specs["box.lookup"].entry()
    assert entry.description.startswith("Look a term up.")
    assert entry.params_schema["required"] == ["term"]
    assert entry.params_schema["properties"]["limit"]["type"] == "integer"


async def test_a_server_wide_risk_applies_to_every_tool_but_those_named() -> None:
    connection = McpConnection(stdio_toolbox(risk="read", tools={"purge": "off"}))
    try:
        specs = {spec.name: spec.risk for spec in await server_specs(connection)}
    finally:
        await connection.close()
    assert specs["box.note"] is Risk.READ and specs["box.grow"] is Risk.READ
    assert "box.purge" not in specs


async def test_a_read_tool_runs_through_the_executor_and_its_result_is_untrusted(
    box: McpConnection,
) -> None:
    executor = Executor(Registry(await server_specs(box)))
    outcome = await executor.run(
        ActionCall(id="c1", name="box.lookup", params={"term": "wp", "limit": 2}), context()
    )
    assert outcome.status is StepStatus.SUCCEEDED
    assert outcome.content == "found wp x2"
    assert outcome.untrusted


async def test_params_the_input_schema_refuses_never_reach_the_server(box: McpConnection) -> None:
    executor = Executor(Registry(await server_specs(box)))
    outcome = await executor.run(
        ActionCall(id="c1", name="box.lookup", params={"limit": "many"}), context()
    )
    assert outcome.status is StepStatus.FAILED
    assert outcome.content.startswith("error: invalid params for box.lookup")
    assert "'term' is a required property" in outcome.content
    assert "limit: 'many' is not of type 'integer'" in outcome.content


async def test_a_tool_error_and_a_crash_are_told_to_the_model(box: McpConnection) -> None:
    executor = Executor(Registry(await server_specs(box)))
    failed = await executor.run(ActionCall(id="c1", name="box.fail", params={}), context())
    assert failed.status is StepStatus.FAILED
    assert "box.fail failed: the tool answered with an error:" in failed.content
    crashed = await executor.run(ActionCall(id="c2", name="box.crash", params={}), context())
    assert crashed.status is StepStatus.FAILED
    assert "MCP server 'box': tools/call 'crash' was cut short" in crashed.content
    again = await executor.run(
        ActionCall(id="c3", name="box.lookup", params={"term": "up"}), context()
    )
    assert again.content == "found up x3" and box.starts == 2


async def test_a_write_cut_short_by_a_crash_is_unknown_unless_the_tool_is_idempotent(
    box: McpConnection,
) -> None:
    # The ledger as a worker that died between a step's intent and its outcome leaves it.
    for tool, params in (("box.note", {"text": "a"}), ("box.tag", {"text": "a"})):
        ledger = MemoryLedger()
        call = ActionCall(id="c1", name=tool, params=params)
        await ledger.intent(call, Risk.WRITE, context(), None)
        executor = Executor(Registry(await server_specs(box)), ledger=ledger)
        outcome = await executor.run(call, context())
        if tool == "box.note":  # no way to look, no promise: told, never sent again
            assert outcome.status is StepStatus.FAILED and outcome.data == {"unknown": True}
            assert (outcome.error or "").startswith("the outcome of box.note is unknown")
        else:  # idempotentHint: sending it again is safe
            assert outcome.status is StepStatus.SUCCEEDED and outcome.content == "tagged a"
    specs = {spec.name: spec for spec in await server_specs(box)}
    assert specs["box.tag"].idempotent and not specs["box.note"].idempotent


async def test_a_server_that_cannot_start_is_left_out_and_named() -> None:
    good = McpConnection(stdio_toolbox())
    bad = McpConnection(server_config("ghost", {"command": "/nope", "env": {"K": TOKEN}}))
    try:
        specs, errors = await catalog_specs_and_errors([bad, good])
    finally:
        await good.close()
        await bad.close()
    assert specs and all(spec.name.startswith("box.") for spec in specs)
    assert [error.server for error in errors] == ["ghost"]
    assert TOKEN not in errors[0].message


def listed_tool(name: str, input_schema: dict[str, object], **extra: object) -> mcp_types.Tool:
    """A tool as a server's tools/list gives it (the wire's JSON, validated by the SDK)."""
    return mcp_types.Tool.model_validate({"name": name, "inputSchema": input_schema, **extra})


def test_a_tool_that_runs_only_as_a_task_is_left_out_whatever_the_owner_says() -> None:
    connection = McpConnection(stdio_toolbox(tools={"research": "read"}))  # never started
    schema = {"type": "object", "properties": {"topic": {"type": "string"}}}
    required = listed_tool("research", schema, execution={"taskSupport": "required"})
    assert tool_spec(connection, required) is None
    for support in ("optional", "forbidden"):
        spec = tool_spec(
            connection, listed_tool("research", schema, execution={"taskSupport": support})
        )
        assert spec is not None and spec.risk is Risk.READ, support
    assert connection.starts == 0


DRAFT_07 = "http://json-schema.org/draft-07/schema#"
# Draft 7's tuple form of `items`: the first item a string, the second an integer. Draft 2020-12
# spells that `prefixItems`; to it, an array here is not a schema at all.
PAIR = {
    "type": "object",
    "properties": {"pair": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}]}},
    "required": ["pair"],
}


def test_params_are_checked_by_the_draft_the_schema_declares_and_the_model_sees_no_draft() -> None:
    connection = McpConnection(stdio_toolbox())
    spec = tool_spec(connection, listed_tool("pair", {"$schema": DRAFT_07, **PAIR}))
    assert spec is not None
    spec.params.model_validate({"pair": ["a", 1]})
    with pytest.raises(ValidationError) as wrong:
        spec.params.model_validate({"pair": ["a", "b"]})
    assert "pair.1: 'b' is not of type 'integer'" in str(wrong.value)
    assert spec.entry().params_schema == PAIR  # as the server wrote it, less `$schema`
    # Without `$schema` it is read as 2020-12, where this schema is broken: refused at once.
    with pytest.raises(jsonschema.SchemaError):
        tool_spec(connection, listed_tool("pair", PAIR))
    assert connection.starts == 0

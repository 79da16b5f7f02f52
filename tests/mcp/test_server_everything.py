"""The MCP client against a server others wrote: `@modelcontextprotocol/server-everything`, the
protocol's reference server from npm (the version tests/npm/package-lock.json pins; `make test`
installs it), over stdio and streamable HTTP: its tools as actions with the risks their
annotations give, a call through an action's handler, a slow tool, a server that dies mid-call
and the tool-list change it announces."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from pressloop.actions.registry import ActionResult, ActionServices, ActionSpec
from pressloop.contracts import ActionContext, Policy, PolicyMode, Risk, Trigger
from pressloop.errors import ActionError
from pressloop.mcp import (
    McpConnection,
    McpServerError,
    ServerConfig,
    load_servers,
    server_specs,
    tool_spec,
)
from tests.support.npm import (
    READ_TOOLS,
    TASK_ONLY,
    WRITE_TOOLS,
    server_everything_http,
    server_everything_stdio,
)
from tests.support.processes import free_port

SLOW = "trigger-long-running-operation"  # sleeps `duration` seconds, in `steps`


def context() -> ActionContext:
    return ActionContext(
        run_id="run_1",
        thread_id="thr_1",
        trigger=Trigger.CHAT,
        step_index=1,
        policy=Policy(write=PolicyMode.ALLOW, destructive=PolicyMode.ALLOW),
    )


def as_configured(entry: dict[str, object]) -> ServerConfig:
    """The server as an owner's `{"mcpServers": ...}` document gives it."""
    [server] = load_servers({"mcpServers": {"everything": entry}})
    return server


def stdio_entry(**extra: object) -> dict[str, object]:
    server = server_everything_stdio()
    return {"command": server.command, "args": server.args, **extra}


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    with server_everything_http() as url:
        yield url


@pytest.fixture(params=["stdio", "http"])
def entry(request: pytest.FixtureRequest) -> dict[str, object]:
    """server-everything's entry in an owner's config, over each transport."""
    if request.param == "stdio":
        return stdio_entry(timeout_s=10)
    return {"url": request.getfixturevalue("http_url"), "timeout_s": 10}


@pytest.fixture
async def everything(entry: dict[str, object]) -> AsyncIterator[McpConnection]:
    connection = McpConnection(as_configured(entry))
    yield connection
    await connection.close()


def text(result: object) -> str:
    return "".join(getattr(block, "text", "") for block in getattr(result, "content", []))


async def specs_of(connection: McpConnection) -> dict[str, ActionSpec]:
    return {spec.name: spec for spec in await server_specs(connection)}


async def test_its_tools_are_actions_with_the_risks_their_annotations_give(
    everything: McpConnection,
) -> None:
    specs = await specs_of(everything)
    listed = {tool.name: tool for tool in await everything.tools()}
    assert set(listed) == READ_TOOLS | WRITE_TOOLS | {TASK_ONLY}
    assert listed[TASK_ONLY].execution is not None
    assert listed[TASK_ONLY].execution.task_support == "required"
    assert tool_spec(everything, listed[TASK_ONLY]) is None
    assert set(specs) == {f"everything.{tool}" for tool in READ_TOOLS | WRITE_TOOLS}
    risks = {name.removeprefix("everything."): spec.risk for name, spec in specs.items()}
    assert {tool for tool, risk in risks.items() if risk is Risk.READ} == READ_TOOLS
    assert {tool for tool, risk in risks.items() if risk is Risk.WRITE} == WRITE_TOOLS
    assert all(spec.untrusted_output for spec in specs.values())
    echo = specs["everything.echo"].entry()
    assert echo.description == "Echoes back the input string (MCP server everything)"
    assert echo.params_schema == {  # its draft-07 schema, less `$schema`
        "type": "object",
        "properties": {"message": {"type": "string"}},
        "required": ["message"],
    }
    assert listed["echo"].input_schema["$schema"] == "http://json-schema.org/draft-07/schema#"


async def test_the_owner_s_word_overrides_the_annotations(entry: dict[str, object]) -> None:
    tools = {"get-env": "off", "toggle-subscriber-updates": "destructive", "echo": "write"}
    connection = McpConnection(as_configured({**entry, "tools": tools}))
    try:
        specs = await specs_of(connection)
        [echo] = [tool for tool in await connection.tools() if tool.name == "echo"]
        one = tool_spec(connection, echo)  # what server_specs does for each tool
        assert one is not None and one.entry() == specs["everything.echo"].entry()
    finally:
        await connection.close()
    assert "everything.get-env" not in specs  # it shows the server's environment: off
    assert specs["everything.toggle-subscriber-updates"].risk is Risk.DESTRUCTIVE
    assert specs["everything.echo"].risk is Risk.WRITE
    assert specs["everything.get-sum"].risk is Risk.READ  # not named: its annotation


async def test_echo_runs_through_its_action_and_the_result_is_untrusted(
    everything: McpConnection,
) -> None:
    echo = (await specs_of(everything))["everything.echo"]
    params = echo.params.model_validate({"message": "hello from Pressloop"})
    result = await echo.handler(params, context(), ActionServices())
    assert result.content == "Echo: hello from Pressloop"
    assert result.untrusted
    assert result.summary == "everything.echo: 26 chars"


async def test_params_its_schema_refuses_are_clear_and_never_sent(
    everything: McpConnection,
) -> None:
    specs = await specs_of(everything)
    with pytest.raises(ValidationError) as wrong_type:
        specs["everything.echo"].params.model_validate({"message": 42})
    assert "message: 42 is not of type 'string'" in str(wrong_type.value)
    with pytest.raises(ValidationError) as missing:
        specs["everything.get-sum"].params.model_validate({"a": 1})
    assert "'b' is a required property" in str(missing.value)
    with pytest.raises(ValidationError) as not_listed:
        specs["everything.get-structured-content"].params.model_validate({"location": "Paris"})
    assert "location: 'Paris' is not one of ['New York', 'Chicago', 'Los Angeles']" in str(
        not_listed.value
    )


async def test_a_tool_error_and_content_other_than_text_are_told_plainly(
    everything: McpConnection,
) -> None:
    reference = (await specs_of(everything))["everything.get-resource-reference"]
    shown = await reference.handler(
        reference.params.model_validate({"resourceId": 2}), context(), ActionServices()
    )
    assert shown.content.splitlines() == [
        "Returning resource reference for Resource 2:",
        "[resource content not shown]",
        "You can access this resource using the URI: demo://resource/dynamic/text/2",
    ]
    # 0 fits the schema ("type": "number"); the tool itself refuses it (isError).
    with pytest.raises(ActionError) as refused:
        await reference.handler(
            reference.params.model_validate({"resourceId": 0}), context(), ActionServices()
        )
    assert not isinstance(refused.value, McpServerError)  # the server is fine
    assert refused.value.message == (
        "the tool answered with an error: Invalid resourceId: 0. Must be a finite positive integer."
    )


async def test_a_slow_tool_ends_in_a_clear_timeout_and_the_server_is_kept(
    everything: McpConnection,
) -> None:
    await everything.tools()
    started = time.monotonic()
    with pytest.raises(McpServerError) as raised:
        await everything.call_tool(SLOW, {"duration": 30, "steps": 1}, timeout_s=1)
    assert time.monotonic() - started < 10  # the deadline, not the tool's 30 s
    assert raised.value.message == (
        f"MCP server 'everything': tools/call '{SLOW}' did not answer within 1 s"
    )
    assert raised.value.retryable and raised.value.outcome_unknown
    echoed = await everything.call_tool("echo", {"message": "still here"})
    assert text(echoed) == "Echo: still here"
    assert everything.starts == 1  # it answered the ping: not restarted


class Waits:
    """The restart backoff's sleeps, recorded instead of slept."""

    def __init__(self) -> None:
        self.seconds: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.seconds.append(seconds)


async def in_flight(call: asyncio.Task[Any]) -> None:
    """Give the call time to reach the server, and make sure it has not ended."""
    await asyncio.sleep(0.5)
    assert not call.done(), call


async def test_a_stdio_server_killed_mid_call_is_a_clear_error_and_restarts(
    tmp_path: Path,
) -> None:
    pid_file = tmp_path / "everything.pid"
    waits = Waits()
    connection = McpConnection(
        server_everything_stdio(pid_file=pid_file, timeout_s=10), sleep=waits, rand=lambda: 1.0
    )
    try:
        specs = await specs_of(connection)
        slow, echo = specs[f"everything.{SLOW}"], specs["everything.echo"]
        first = int(pid_file.read_text())
        params = slow.params.model_validate({"duration": 30, "steps": 1})

        async def run_slow() -> ActionResult:
            return await slow.handler(params, context(), ActionServices())

        call = asyncio.create_task(run_slow())
        await in_flight(call)
        os.kill(first, signal.SIGKILL)
        with pytest.raises(McpServerError) as raised:
            await asyncio.wait_for(call, 10)
        assert raised.value.message == (
            f"MCP server 'everything': tools/call '{SLOW}' was cut short: "
            "the server exited or closed the connection; it is restarted on next use"
        )
        assert not raised.value.outcome_unknown  # a read tool: nothing to have taken effect
        again = await echo.handler(
            echo.params.model_validate({"message": "back"}), context(), ActionServices()
        )
        assert again.content == "Echo: back"
        assert connection.starts == 2 and int(pid_file.read_text()) != first
        assert len(waits.seconds) == 1 and 0 < waits.seconds[0] <= 0.5  # backed off, once
    finally:
        await connection.close()


async def test_an_http_server_gone_mid_call_is_a_clear_error_and_is_reconnected() -> None:
    port = free_port()
    waits = Waits()
    connection = McpConnection(
        as_configured({"url": f"http://127.0.0.1:{port}/mcp", "timeout_s": 10}), sleep=waits
    )
    try:
        with server_everything_http(port):
            await connection.tools()
            call = asyncio.create_task(
                connection.call_tool(SLOW, {"duration": 30, "steps": 1}, timeout_s=20)
            )
            await in_flight(call)
        with pytest.raises(McpServerError) as raised:
            await asyncio.wait_for(call, 10)  # long before the call's own 20 s
        assert raised.value.message == (
            f"MCP server 'everything': tools/call '{SLOW}' was cut short: "
            "the server exited or closed the connection; it is restarted on next use"
        )
        assert raised.value.retryable and raised.value.outcome_unknown
        with pytest.raises(McpServerError) as down:
            await connection.call_tool("echo", {"message": "anyone?"})
        assert down.value.message == (
            f"MCP server 'everything': could not be reached at http://127.0.0.1:{port}/mcp: "
            "All connection attempts failed"
        )
        assert down.value.retryable and connection.last_failure == down.value.message
        with server_everything_http(port):
            echoed = await connection.call_tool("echo", {"message": "back"})
        assert text(echoed) == "Echo: back"
        assert connection.starts == 3
    finally:
        await connection.close()


async def test_the_tool_list_change_it_announces_is_picked_up() -> None:
    """server-everything registers simulate-research-query when the client says it initialized,
    and says the tool list changed. Over stdio only: over streamable HTTP it sends that before
    the client has opened its GET stream, and its SDK drops the notification (the spec lets a
    server do so)."""
    changed = asyncio.Event()
    connection = McpConnection(
        as_configured(stdio_entry(timeout_s=10)), on_tools_changed=changed.set
    )
    try:
        await connection.tools()
        try:
            await asyncio.wait_for(changed.wait(), 5)
        except TimeoutError:
            pytest.fail("no notifications/tools/list_changed within 5 s")
        names = [tool.name for tool in await connection.tools()]
        assert names[-1] == "simulate-research-query" and "echo" in names
        assert connection.starts == 1
    finally:
        await connection.close()

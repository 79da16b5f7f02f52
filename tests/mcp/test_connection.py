"""One MCP server connection (`pressloop/mcp/connection.py`) against a real server (the
toolbox, over stdio and streamable HTTP): lazy start, a hang that ends in a clear timeout, a
crash mid-call and the restart after it (with backoff), a changed tool list, secrets, and an
HTTP server that refuses the credentials or cannot be reached, said plainly."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from pressloop.mcp.config import server_config
from pressloop.mcp.connection import McpConnection
from pressloop.mcp.errors import McpServerError
from tests.mcp.support import TOKEN, free_port, http_toolbox, stdio_toolbox


@pytest.fixture
async def box() -> AsyncIterator[McpConnection]:
    connection = McpConnection(stdio_toolbox(timeout_s=10))
    yield connection
    await connection.close()


def text(result: object) -> str:
    return "".join(getattr(block, "text", "") for block in getattr(result, "content", []))


async def test_the_server_starts_on_first_use_and_stays_up(box: McpConnection) -> None:
    assert box.starts == 0
    names = [tool.name for tool in await box.tools()]
    assert {"lookup", "purge", "note", "nap", "crash", "grow"} <= set(names)
    assert text(await box.call_tool("lookup", {"term": "wp"})) == "found wp x3"
    assert text(await box.call_tool("whoami", {})) == f"token {TOKEN}"  # the env reached it
    assert box.starts == 1


async def test_a_hang_ends_in_a_clear_timeout_and_the_server_is_kept(box: McpConnection) -> None:
    await box.tools()
    started = time.monotonic()
    with pytest.raises(McpServerError) as raised:
        await box.call_tool("nap", {"seconds": 30}, timeout_s=1)
    assert time.monotonic() - started < 2.5
    assert raised.value.message == "MCP server 'box': tools/call 'nap' did not answer within 1 s"
    assert raised.value.retryable and raised.value.outcome_unknown
    # Still alive (it answers pings): the next call needs no restart.
    assert text(await box.call_tool("lookup", {"term": "x"})) == "found x x3"
    assert box.starts == 1


async def test_a_crash_mid_call_is_a_clear_error_and_the_next_call_restarts_it() -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    connection = McpConnection(stdio_toolbox(timeout_s=10), sleep=sleep, rand=lambda: 1.0)
    try:
        with pytest.raises(McpServerError) as raised:
            await connection.call_tool("crash", {})
        assert "tools/call 'crash' was cut short: the server exited" in raised.value.message
        assert raised.value.retryable
        assert text(await connection.call_tool("lookup", {"term": "y"})) == "found y x3"
        assert connection.starts == 2
        # The restart waited (full jitter, here its ceiling: 0.5 s less the time since).
        assert len(waits) == 1 and 0 < waits[0] <= 0.5
    finally:
        await connection.close()


async def test_restarts_back_off_further_each_time_until_a_call_succeeds() -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    frozen = 100.0  # the clock does not move: every wait is the whole jittered delay
    connection = McpConnection(
        stdio_toolbox(timeout_s=10), sleep=sleep, rand=lambda: 1.0, monotonic=lambda: frozen
    )
    try:
        for _ in range(3):
            with pytest.raises(McpServerError):
                await connection.call_tool("crash", {})
        assert waits == [0.5, 1.0]  # before the 2nd and 3rd start
        await connection.call_tool("lookup", {"term": "z"})
        assert waits == [0.5, 1.0, 2.0]
        await connection.call_tool("lookup", {"term": "z"})  # no crash since: no wait
        assert waits == [0.5, 1.0, 2.0]
    finally:
        await connection.close()


async def test_a_changed_tool_list_is_picked_up_without_a_restart(box: McpConnection) -> None:
    changes: list[str] = []
    box._on_tools_changed = lambda: changes.append("changed")
    assert "extra" not in [tool.name for tool in await box.tools()]
    assert text(await box.call_tool("grow", {"name": "extra"})) == "added extra"
    assert changes == ["changed"]
    assert "extra" in [tool.name for tool in await box.tools()]
    assert text(await box.call_tool("extra", {})) == "I am extra"
    assert box.starts == 1


async def test_a_server_that_cannot_start_is_a_clear_error_without_its_secrets() -> None:
    config = server_config(
        "ghost", {"command": "/nonexistent/mcp-server", "env": {"API_KEY": TOKEN}}
    )
    connection = McpConnection(config)
    with pytest.raises(McpServerError) as raised:
        await connection.tools()
    assert raised.value.message.startswith("MCP server 'ghost': could not be started")
    assert TOKEN not in raised.value.message and TOKEN not in repr(connection)
    assert TOKEN not in repr(config)
    await connection.close()
    with pytest.raises(McpServerError, match="closed"):
        await connection.tools()


async def test_streamable_http_lists_calls_and_times_out_with_headers_kept_secret() -> None:
    with http_toolbox() as url:
        config = server_config(
            "web", {"url": url, "headers": {"Authorization": f"Bearer {TOKEN}"}, "timeout_s": 10}
        )
        changed = asyncio.Event()
        connection = McpConnection(config, on_tools_changed=changed.set)
        try:
            assert "lookup" in [tool.name for tool in await connection.tools()]
            assert text(await connection.call_tool("lookup", {"term": "h"})) == "found h x3"
            with pytest.raises(McpServerError) as raised:
                await connection.call_tool("nap", {"seconds": 30}, timeout_s=1)
            assert "did not answer within 1 s" in raised.value.message
            assert TOKEN not in raised.value.message
            assert TOKEN not in repr(config) and TOKEN not in repr(connection)
            assert text(await connection.call_tool("grow", {"name": "more"})) == "added more"
            # Over HTTP the change comes on the GET stream, not before the call's answer.
            await asyncio.wait_for(changed.wait(), 10)
            assert "more" in [tool.name for tool in await connection.tools()]
        finally:
            await connection.close()


@asynccontextmanager
async def refusing_server(status: bytes = b"401 Unauthorized") -> AsyncIterator[str]:
    """An HTTP server that refuses every request as an endpoint behind a bearer token does
    (Pressloop's own /mcp answers so without a valid token); yields its /mcp URL."""
    body = b'{"error": {"code": "unauthorized", "message": "a valid API token is needed"}}'

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            for line in head.decode("latin-1").split("\r\n"):
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    await reader.readexactly(int(value.strip() or 0))
            writer.write(
                b"HTTP/1.1 " + status + b"\r\nContent-Type: application/json\r\n"
                b"WWW-Authenticate: Bearer\r\nConnection: close\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/mcp"
    finally:
        server.close()
        await server.wait_closed()


@pytest.mark.parametrize(
    ("status", "said"),
    [(b"401 Unauthorized", "401 Unauthorized"), (b"403 Forbidden", "403 Forbidden")],
)
async def test_an_http_server_refusing_the_credentials_says_its_status(
    status: bytes, said: str
) -> None:
    async with refusing_server(status) as url:
        config = server_config(
            "web",
            {
                "url": f"{url}?key={TOKEN}",
                "headers": {"Authorization": f"Bearer {TOKEN}"},
                "timeout_s": 10,
            },
        )
        connection = McpConnection(config)
        try:
            with pytest.raises(McpServerError) as raised:
                await connection.tools()
        finally:
            await connection.close()
    # Not "could not be started (ExceptionGroup)", nor the SDK's "error response": the status,
    # and the URL without its query (which may carry a key, as here).
    assert raised.value.message == f"MCP server 'web': answered HTTP {said} at {url}"
    assert raised.value.retryable and TOKEN not in raised.value.message


async def test_an_http_server_that_cannot_be_reached_says_where_and_why() -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"  # nothing listens there
    config = server_config(
        "web", {"url": url, "headers": {"Authorization": f"Bearer {TOKEN}"}, "timeout_s": 10}
    )
    connection = McpConnection(config)
    try:
        for _ in range(2):  # the first start, then the restart after its backoff
            with pytest.raises(McpServerError) as raised:
                await connection.tools()
            assert raised.value.message == (
                f"MCP server 'web': could not be reached at {url}: All connection attempts failed"
            )
            assert TOKEN not in raised.value.message
        assert connection.last_failure == raised.value.message and connection.starts == 2
    finally:
        await connection.close()

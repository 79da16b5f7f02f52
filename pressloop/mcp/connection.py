"""One connection to one outside MCP server (stdio or streamable HTTP).

Started lazily on first use and kept alive. The SDK's transport and session live in one task
this connection owns (anyio cancel scopes must be entered and left by the same task); callers
hand it jobs through a queue and wait on futures, always with a deadline, so a server that
hangs or dies never leaves a call stuck. A server that died is started again on next use, with
full-jitter backoff between restarts.

Why a start failed or a connection was lost is said from the first error inside the SDK's task
groups (an `ExceptionGroup` names nothing): a command that cannot run, a server that refused the
handshake, an address that cannot be reached ("could not be reached at <url>: <reason>") or an
HTTP status (a 401 or 403 is raised at once, so it is never hidden behind the SDK's "error
response"). The URL is shown without its query or user info; headers and env values never are.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp import types as mcp_types
from mcp.client.session import IncomingMessage, MessageHandlerFnT
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import CONNECTION_CLOSED, REQUEST_TIMEOUT

from pressloop.backoff import full_jitter
from pressloop.clock import Monotonic, Sleep, real_sleep
from pressloop.mcp.config import (
    RESTART_BACKOFF_BASE_S,
    RESTART_BACKOFF_CAP_S,
    HttpServer,
    ServerConfig,
    StdioServer,
)
from pressloop.mcp.errors import McpServerError

log = logging.getLogger(__name__)

# Streams the SDK's transports yield: (read, write).
Streams = tuple[Any, Any]
Transport = Callable[[ServerConfig], AbstractAsyncContextManager[Streams]]
# How long a server that missed a deadline gets to answer a ping before it counts as hung.
PING_TIMEOUT_S = 5.0
# What the caller waits beyond a call's own timeout for the owner task to answer it at all.
DEADLINE_GRACE_S = 2.0
# The SDK's stdio shutdown waits up to ~4.5 s (stdin closed, then SIGTERM, then SIGKILL).
CLOSE_TIMEOUT_S = 10.0


@contextlib.asynccontextmanager
async def open_transport(server: ServerConfig) -> AsyncIterator[Streams]:
    """The SDK transport for a server's config (stdio process or streamable HTTP)."""
    if isinstance(server, StdioServer):
        params = StdioServerParameters(
            command=server.command, args=server.args, env=server.env_values(), cwd=server.cwd
        )
        async with stdio_client(params) as streams:
            yield streams
    else:
        assert isinstance(server, HttpServer)
        timeout = httpx2.Timeout(server.timeout_s, read=max(server.timeout_s, 300.0))
        hooks = {"response": [_refuse_unauthorized]}
        async with (
            httpx2.AsyncClient(
                headers=server.header_values(), timeout=timeout, event_hooks=hooks
            ) as client,
            streamable_http_client(server.url, http_client=client) as streams,
        ):
            yield streams


# Statuses that say our credentials were refused: no JSON-RPC answer follows them.
REFUSED_STATUSES = frozenset({401, 403})


async def _refuse_unauthorized(response: httpx2.Response) -> None:
    """Raise for a 401 or 403 at once: the SDK would turn it into a JSON-RPC "error response"
    and the owner would not learn that the server refused the credentials."""
    if response.status_code in REFUSED_STATUSES:
        response.raise_for_status()


def first_error(failure: BaseException) -> BaseException:
    """The first error inside (nested) exception groups: what actually went wrong."""
    while isinstance(failure, BaseExceptionGroup) and failure.exceptions:
        failure = failure.exceptions[0]
    return failure


def shown_url(url: httpx2.URL | str) -> str:
    """A URL as an error may show it: no user info, query or fragment (they may carry keys)."""
    parsed = httpx2.URL(str(url))
    port = f":{parsed.port}" if parsed.port is not None else ""
    return f"{parsed.scheme}://{parsed.host}{port}{parsed.path}"


def http_failure(failure: BaseException, url: str) -> str | None:
    """What an HTTP failure means for the owner, or None when it is not one."""
    if isinstance(failure, httpx2.HTTPStatusError):
        response = failure.response
        phrase = f" {response.reason_phrase}" if response.reason_phrase else ""
        return f"answered HTTP {response.status_code}{phrase} at {shown_url(url)}"
    if isinstance(failure, httpx2.TransportError):
        reason = str(failure) or type(failure).__name__
        return f"could not be reached at {shown_url(url)}: {reason}"
    return None


@dataclass
class _Job:
    work: Callable[[ClientSession], Awaitable[Any]]
    what: str  # for errors: "tools/call 'search'"
    done: asyncio.Future[Any]
    timeout_s: float


@dataclass
class _Live:
    """One started session: its owner task, its job queue and what it knows."""

    jobs: asyncio.Queue[_Job | None] = field(default_factory=asyncio.Queue)
    ready: asyncio.Future[None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )
    task: asyncio.Task[None] | None = None
    tools: list[mcp_types.Tool] = field(default_factory=list)
    tools_stale: bool = False
    lost: str | None = None  # why it stopped (died, hung): the next use restarts the server


class McpConnection:
    """A lazily started, self-restarting connection to one MCP server."""

    def __init__(
        self,
        server: ServerConfig,
        *,
        transport: Transport = open_transport,
        sleep: Sleep = real_sleep,
        monotonic: Monotonic = time.monotonic,
        rand: Callable[[], float] = random.random,
        on_tools_changed: Callable[[], None] | None = None,
        restart_base_s: float = RESTART_BACKOFF_BASE_S,
        restart_cap_s: float = RESTART_BACKOFF_CAP_S,
        fail_fast: bool = False,
    ) -> None:
        """`fail_fast`: while a server that failed waits for its next start, a use says so at
        once (a turn is not held up by it) instead of waiting out the backoff."""
        self.server = server
        self._transport = transport
        self._sleep = sleep
        self._monotonic = monotonic
        self._rand = rand
        self._on_tools_changed = on_tools_changed
        self._restart_base_s = restart_base_s
        self._restart_cap_s = restart_cap_s
        self._fail_fast = fail_fast
        self.last_failure: str | None = None  # why it last failed to start or was lost
        self._live: _Live | None = None
        self._lock = asyncio.Lock()
        self._failures = 0  # consecutive deaths and failed starts, for the restart backoff
        self._failed_at = 0.0
        self._closed = False
        self.starts = 0  # how many times the server was started (tests, metrics)

    @property
    def name(self) -> str:
        return self.server.name

    def __repr__(self) -> str:
        return f"McpConnection({self.name!r}, starts={self.starts})"

    async def tools(self) -> list[mcp_types.Tool]:
        """The server's tools, listed again when it said they changed (or after a restart)."""
        live = await self._ensure_live()
        if live.tools_stale:
            live.tools_stale = False
            live.tools = await self._submit(live, _list_tools, "tools/list", self.server.timeout_s)
        return list(live.tools)

    async def call_tool(
        self, tool: str, arguments: dict[str, Any], *, timeout_s: float | None = None
    ) -> mcp_types.CallToolResult:
        """Call a tool; a server that dies or misses the deadline raises McpServerError."""
        timeout = timeout_s if timeout_s is not None else self.server.timeout_s
        live = await self._ensure_live()

        async def work(session: ClientSession) -> mcp_types.CallToolResult:
            return await session.call_tool(tool, arguments, read_timeout_seconds=timeout)

        result: mcp_types.CallToolResult = await self._submit(
            live, work, f"tools/call {tool!r}", timeout
        )
        self._failures = 0
        return result

    async def close(self) -> None:
        """Stop the server (its process exits) and refuse later use."""
        self._closed = True
        async with self._lock:
            live, self._live = self._live, None
        if live is not None:
            await _stop(live)

    # -- starting and restarting ------------------------------------------------------------

    async def _ensure_live(self) -> _Live:
        if self._closed:
            raise McpServerError(self.name, "the connection is closed", retryable=False)
        async with self._lock:
            live = self._live
            if live is not None and live.lost is None:
                return live
            if live is not None:
                self._live = None
                self.last_failure = live.lost
                await _stop(live)
            await self._back_off()
            live = _Live()
            self.starts += 1
            live.task = asyncio.create_task(self._own(live), name=f"mcp:{self.name}")
            try:
                await asyncio.wait_for(
                    asyncio.shield(live.ready), self.server.timeout_s + DEADLINE_GRACE_S
                )
            except BaseException as failure:
                self._failed()
                self.last_failure = str(failure) or type(failure).__name__
                await _stop(live)
                if isinstance(failure, McpServerError):
                    self.last_failure = failure.message
                    raise
                if isinstance(failure, TimeoutError):
                    raise McpServerError(
                        self.name, f"did not start within {self.server.timeout_s:g} s"
                    ) from None
                raise
            self._live = live
            return live

    async def _back_off(self) -> None:
        """Wait before restarting a server that keeps failing, less the time since it failed."""
        if self._failures == 0:
            return
        delay = full_jitter(
            self._failures,
            base_s=self._restart_base_s,
            cap_s=self._restart_cap_s,
            rand=self._rand,
        )
        remaining = delay - (self._monotonic() - self._failed_at)
        if remaining > 0 and self._fail_fast:
            why = self.last_failure or "it failed"
            raise McpServerError(
                self.name, f"is down ({why}); it is started again in {remaining:.1f} s"
            )
        if remaining > 0:
            await self._sleep(remaining)

    def _failed(self) -> None:
        self._failures += 1
        self._failed_at = self._monotonic()

    # -- the owner task ---------------------------------------------------------------------

    async def _own(self, live: _Live) -> None:
        """Runs the transport and the session for one start, and every job sent to it."""
        try:
            async with AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._transport(self.server))
                session_read = await stack.enter_async_context(self._watched(read, live))
                session = await stack.enter_async_context(
                    ClientSession(session_read, write, message_handler=self._handler(live))
                )
                with anyio.fail_after(self.server.timeout_s):
                    await session.initialize()
                    live.tools = await _list_tools(session)
                live.ready.set_result(None)
                async with anyio.create_task_group() as jobs:
                    while (job := await live.jobs.get()) is not None:
                        jobs.start_soon(self._run, session, live, job)
                    jobs.cancel_scope.cancel()  # jobs still running learn why in _run
        except Exception as failure:
            if not live.ready.done():
                live.ready.set_exception(self._start_error(failure))
            else:
                live.lost = live.lost or self._lost_reason(failure)
                log.warning("MCP server %r: connection failed: %s", self.name, live.lost)
        finally:
            if not live.ready.done():
                live.ready.set_exception(McpServerError(self.name, "stopped while starting"))
            live.lost = live.lost or "the connection was closed"
            _fail_queued(live, self.name)

    @contextlib.asynccontextmanager
    async def _watched(self, read: Any, live: _Live) -> AsyncIterator[Any]:
        """The transport's read stream, relayed: when it ends (the process exited, the
        connection dropped) the server is lost and the owner task stops."""
        send, receive = anyio.create_memory_object_stream[Any](0)

        async def relay() -> None:
            async with send:
                with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                    async for item in read:
                        await send.send(item)
            if live.ready.done() and live.lost is None:
                live.lost = "the server exited or closed the connection"
            live.jobs.put_nowait(None)

        async with anyio.create_task_group() as relays, receive:
            relays.start_soon(relay)
            yield receive
            relays.cancel_scope.cancel()

    def _handler(self, live: _Live) -> MessageHandlerFnT:
        async def handle(message: IncomingMessage) -> None:
            if isinstance(message, mcp_types.ToolListChangedNotification):
                live.tools_stale = True
                if self._on_tools_changed is not None:
                    self._on_tools_changed()
            elif isinstance(message, Exception):
                # A line the server wrote that is not JSON-RPC, a dropped stream: logged by
                # type only (its text may quote what was sent, headers included).
                log.warning("MCP server %r: transport error %s", self.name, type(message).__name__)

        return handle

    async def _run(self, session: ClientSession, live: _Live, job: _Job) -> None:
        try:
            result = await job.work(session)
        except anyio.get_cancelled_exc_class():
            _settle(job.done, error=self._lost_error(live, job))
            raise
        except MCPError as error:
            if error.code == REQUEST_TIMEOUT:
                _settle(job.done, error=self._timeout_error(job))
                await self._check_alive(session, live)
            elif error.code == CONNECTION_CLOSED:
                live.lost = live.lost or "the server exited or closed the connection"
                _settle(job.done, error=self._lost_error(live, job))
                live.jobs.put_nowait(None)
            else:  # the server answered with an error: it is alive, the request was refused
                message = f"{job.what} was refused: {error.message} (code {error.code})"
                _settle(job.done, error=McpServerError(self.name, message, retryable=False))
        except Exception as failure:  # a transport error: restart on next use
            live.lost = live.lost or self._lost_reason(failure)
            _settle(job.done, error=self._lost_error(live, job))
            live.jobs.put_nowait(None)
        else:
            _settle(job.done, result=result)

    async def _check_alive(self, session: ClientSession, live: _Live) -> None:
        """A call missed its deadline: a server that cannot even answer a ping is hung, and is
        stopped (the next use starts it again)."""
        with anyio.move_on_after(PING_TIMEOUT_S) as scope:
            with contextlib.suppress(MCPError):
                await session.send_ping()
                return
        live.lost = live.lost or (
            "the server stopped answering" if scope.cancelled_caught else "the ping failed"
        )
        live.jobs.put_nowait(None)

    # -- submitting jobs --------------------------------------------------------------------

    async def _submit(
        self,
        live: _Live,
        work: Callable[[ClientSession], Awaitable[Any]],
        what: str,
        timeout_s: float,
    ) -> Any:
        if live.task is None or live.task.done():
            why = live.lost or "the connection was closed"
            raise McpServerError(self.name, f"{what} was not sent: {why}")
        done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        job = _Job(work=work, what=what, done=done, timeout_s=timeout_s)
        live.jobs.put_nowait(job)
        try:
            # The SDK enforces `timeout_s`; this outer deadline covers an owner task that is
            # itself stuck, so no caller ever waits forever.
            return await asyncio.wait_for(asyncio.shield(done), timeout_s + DEADLINE_GRACE_S)
        except TimeoutError:
            live.lost = live.lost or "the server stopped answering"
            live.jobs.put_nowait(None)
            raise self._timeout_error(job) from None
        except McpServerError as error:
            if error.retryable and live.lost is not None:
                self._failed()
            raise

    def _timeout_error(self, job: _Job) -> McpServerError:
        return McpServerError(
            self.name,
            f"{job.what} did not answer within {job.timeout_s:g} s",
            outcome_unknown=True,
        )

    def _lost_error(self, live: _Live, job: _Job) -> McpServerError:
        why = live.lost or "the connection was closed"
        return McpServerError(
            self.name,
            f"{job.what} was cut short: {why}; it is restarted on next use",
            outcome_unknown=True,
        )

    def _lost_reason(self, failure: BaseException) -> str:
        """Why a started connection failed, from the first error inside any group."""
        failure = first_error(failure)
        if isinstance(self.server, HttpServer):
            said = http_failure(failure, self.server.url)
            if said is not None:
                return f"the server {said}"
        return f"the connection failed ({type(failure).__name__})"

    def _start_error(self, failure: BaseException) -> McpServerError:
        failure = first_error(failure)
        if isinstance(self.server, HttpServer):
            said = http_failure(failure, self.server.url)
            if said is not None:
                return McpServerError(self.name, said)
        if isinstance(failure, TimeoutError):
            return McpServerError(self.name, f"did not start within {self.server.timeout_s:g} s")
        if isinstance(failure, OSError):  # the command is missing or not executable
            return McpServerError(self.name, f"could not be started: {failure.strerror or failure}")
        if isinstance(failure, MCPError):
            return McpServerError(self.name, f"refused to start: {failure.message}")
        return McpServerError(self.name, f"could not be started ({type(failure).__name__})")


async def _list_tools(session: ClientSession) -> list[mcp_types.Tool]:
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    while True:
        params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return tools


def _settle(
    done: asyncio.Future[Any], *, result: Any = None, error: Exception | None = None
) -> None:
    if done.done():
        return
    if error is not None:
        done.set_exception(error)
    else:
        done.set_result(result)


def _fail_queued(live: _Live, server: str) -> None:
    while not live.jobs.empty():
        job = live.jobs.get_nowait()
        if job is not None:
            why = live.lost or "the connection was closed"
            _settle(job.done, error=McpServerError(server, f"{job.what} was not sent: {why}"))


async def _stop(live: _Live) -> None:
    """Ask the owner task to stop (the transport then ends the server) and wait for it."""
    live.jobs.put_nowait(None)
    task = live.task
    if task is None or task.done():
        return
    try:
        await asyncio.wait_for(asyncio.shield(task), CLOSE_TIMEOUT_S)
    except TimeoutError:
        task.cancel()
        with contextlib.suppress(BaseException):
            await task

"""A stream handed over to the stream process (`pressloop.streamer`): this process writes the
response's headers, passes the connection on, and sends the run's committed events instead of
writing them.

The server keeps the connection: it reads it (a client that leaves, a request that follows on
the kept-alive connection) and writes the response's last chunk once the stream process has
written everything (`done`). Until then this process writes nothing on it. Whatever fails before
the stream process holds the connection (it is not running, it refused) leaves the stream here,
as it is without a stream process (`fallback`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import socket
import weakref
from collections.abc import Callable
from typing import Any

from sse_starlette import EventSourceResponse
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from pressloop.api.frames import frame
from pressloop.api.sse import ResumePoint, event_stream
from pressloop.api.stream_channel import (
    END,
    event_message,
    open_message,
    read_message,
)
from pressloop.runtime.bus import Subscription
from pressloop.runtime.service import Service

logger = logging.getLogger(__name__)

# Where the server puts the connection's transport in a request's scope.
TRANSPORT_EXTENSION = "pressloop.transport"


class HandingOverProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol (its default), which lends each request the connection's
    transport (`uvicorn.Config(http=...)`, the server's own extension point)."""

    def on_headers_complete(self) -> None:
        extensions: dict[str, Any] = self.scope.setdefault("extensions", {})
        extensions[TRANSPORT_EXTENSION] = self.transport
        super().on_headers_complete()


class Channel:
    """This process's side of one handed-over stream."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self.closed = False
        self.done = asyncio.Event()

    @classmethod
    async def open(
        cls,
        control_path: str,
        connection: socket.socket,
        run_id: str,
        key: str,
        ping_s: float,
        *,
        timeout_s: float,
    ) -> Channel:
        """The stream process holds `connection` when this returns (else it raises, at the
        latest after `timeout_s` for each of its answers: PRESSLOOP_STREAM_OPEN_TIMEOUT)."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout_s):
                await loop.sock_connect(sock, control_path)
            socket.send_fds(sock, [open_message(key, run_id, ping_s)], [connection.fileno()])
            reader, writer = await asyncio.open_unix_connection(sock=sock)
        except BaseException:
            sock.close()  # not a stream's yet: closed here
            raise
        try:
            async with asyncio.timeout(timeout_s):
                answer = read_message(await reader.readline() or b"{}")
            if not answer.get("ok"):
                raise ConnectionError(f"the stream process refused the stream: {answer}")
        except BaseException:
            writer.close()  # the stream's now: closed through it (its transport has the fd)
            raise
        return cls(reader, writer)

    def send(self, message: bytes) -> None:
        if not self.closed:
            self._writer.write(message)

    async def listen(self) -> None:
        """The stream process's answers until the last: `done` (all written) or `gone` (the
        client left, or the frames went wrong); a channel that fails ends the stream too."""
        try:
            while line := await self._reader.readline():
                message = read_message(line)
                if "gone" in message or message.get("done"):
                    break
        except (OSError, ValueError):
            pass
        finally:
            self.closed = True
            self.done.set()

    def close(self) -> None:
        self.closed = True
        self._writer.close()


class Route:
    """A run's calls through the stream process, from its submission: optimistic until the
    hand-over fails or its channel closes."""

    def __init__(self) -> None:
        self.channel: Channel | None = None
        self.failed = False

    def alive(self) -> bool:
        return not self.failed and (self.channel is None or not self.channel.closed)


class HandedOverResponse(Response):
    """The stream of a run this process runs, written by the stream process."""

    def __init__(
        self,
        service: Service,
        run_id: str,
        subscription: Subscription,
        *,
        key: str,
        route: Route,
        control_path: str,
        ping_s: float,
        headers: list[tuple[bytes, bytes]],
        fallback: Callable[[], Response],
    ) -> None:
        super().__init__()  # what a framework looks for on a response (its background tasks)
        self._service = service
        self._run_id = run_id
        self._subscription = subscription
        self._key = key
        self._route = route
        self._control_path = control_path
        self._ping_s = ping_s
        self._handover_headers = headers
        self._fallback = fallback

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            transport = scope.get("extensions", {}).get(TRANSPORT_EXTENSION)
            if transport is None or transport.is_closing():
                self._stays_here()
                await self._fallback()(scope, receive, send)
                return
            start = {"type": "http.response.start", "status": 200}
            await send({**start, "headers": self._handover_headers})
            try:
                await _written(transport)
                connection = transport.get_extra_info("socket")
                channel = await Channel.open(
                    self._control_path,
                    connection,
                    self._run_id,
                    self._key,
                    self._ping_s,
                    timeout_s=self._service.settings.stream_open_timeout_s,
                )
            except Exception:
                self._stays_here()
                logger.warning("a stream stays in this process (no stream process)", exc_info=True)
                await self._frames_here(send)
                return
            self._route.channel = channel
            await self._handed_over(channel, receive)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            self._service.runner.relays.unwatch(self._run_id, self._key)

    def _stays_here(self) -> None:
        """The run's calls go straight to the model again, its deltas to the database."""
        self._route.failed = True
        self._service.runner.relays.unwatch(self._run_id, self._key)

    async def _handed_over(self, channel: Channel, receive: Receive) -> None:
        # The stream process cuts the model's text itself: parts made here would only be
        # dropped (the committed events go to it whole).
        self._subscription.parts = False
        self._subscription.take_parts()
        listening = asyncio.create_task(channel.listen())
        forwarding = asyncio.create_task(self._forward(channel))
        leaving = asyncio.create_task(_disconnected(receive))
        try:
            await asyncio.wait([forwarding, listening, leaving], return_when="FIRST_COMPLETED")
            if forwarding.done() and forwarding.exception() is None and not channel.closed:
                channel.send(END)
                with contextlib.suppress(TimeoutError):
                    # PRESSLOOP_STREAM_END_TIMEOUT: its last frames written, or given up on.
                    async with asyncio.timeout(self._service.settings.stream_end_timeout_s):
                        await channel.done.wait()
        finally:
            for task in (forwarding, listening, leaving):
                task.cancel()
            await asyncio.gather(forwarding, listening, leaving, return_exceptions=True)
            channel.close()

    async def _forward(self, channel: Channel) -> None:
        events = self._service.follow(self._run_id, subscription=self._subscription)
        async for event in events:
            channel.send(event_message(event))

    async def _frames_here(self, send: Send) -> None:
        """The headers went out, the stream process did not take it: every event from here,
        at its commit."""
        self._subscription.parts = False
        self._subscription.take_parts()
        async for event in self._service.follow(self._run_id, subscription=self._subscription):
            body = frame(event).encode()
            await send({"type": "http.response.body", "body": body, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _written(transport: Any) -> None:
    """Wait until the server has put everything it was given on the wire (the headers)."""
    while transport.get_write_buffer_size():
        if transport.is_closing():
            raise ConnectionError("the client left")
        await asyncio.sleep(0.001)


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


def run_stream(
    request: Request, run_id: str, *, start: ResumePoint, subscription: Subscription | None
) -> Response:
    """The stream of a run just submitted: through the stream process when there is one and
    the run runs here (`subscription`), else written here (`sse.event_stream`)."""
    state = request.app.state
    control_path = state.service.settings.streamer_control

    def here() -> Response:
        return event_stream(request, run_id, start=start, subscription=subscription)

    if not control_path or subscription is None or start != ResumePoint(0):
        return here()
    headers = EventSourceResponse(iter(()), ping=state.sse_ping_s).raw_headers
    # The run's model calls go through the stream process from its first (the run starts
    # before this response does): the stream process keeps their text until the stream opens.
    key, route = secrets.token_urlsafe(16), Route()
    relays = state.service.runner.relays
    relays.watch(run_id, key, alive=route.alive)
    response = HandedOverResponse(
        state.service,
        run_id,
        subscription,
        key=key,
        route=route,
        control_path=control_path,
        ping_s=state.sse_ping_s,
        headers=headers,
        fallback=here,
    )
    # A response dropped before it runs never unsubscribes (`sse.event_stream` does the same).
    weakref.finalize(response, _release, state.service, run_id, subscription, key)
    return response


def _release(service: Service, run_id: str, subscription: Subscription, key: str) -> None:
    service.bus.unsubscribe(run_id, subscription)
    service.runner.relays.unwatch(run_id, key)

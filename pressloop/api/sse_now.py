"""A frame written on an event stream by the task that has it, without waking the stream's task.

A text delta of a turn running here reaches its stream through the bus: the turn's task hands it
over and the stream's task, woken, sends it one loop iteration later. Under load an iteration
runs every other ready task first, and that wait was a quarter of a first token's time to the
client (docs/benchmarks.md, section 3m). `FrameWriter.send_now` sends the frame from the turn's
task instead, when the stream's reader waits with nothing held (`ServiceReads.follow`'s
`send_now`).

The ASGI `send` is a coroutine; the server writes a body at once unless the client reads too
slowly (then it first waits until the socket drains). So the coroutine is stepped here, in the
caller's task, as Python 3.12's eager tasks step a new task: when it finishes at once, the
frame is on the wire; when it has to wait, a task finishes it, and the stream sends nothing else
before that task is done (`settled`), so frames never change order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.types import Message, Receive, Scope, Send


class FrameWriter:
    """Writes frames on one response's `send` (set when the response starts)."""

    def __init__(self) -> None:
        self._send: Send | None = None
        self._finishing: asyncio.Task[None] | None = None

    def attach(self, send: Send) -> None:
        self._send = send

    def detach(self) -> None:
        self._send = None

    async def settled(self) -> None:
        """Return once no frame sent here is still being written."""
        if self._finishing is not None:
            await asyncio.shield(self._finishing)
            self._finishing = None

    def send_now(self, frame: ServerSentEvent) -> bool:
        """Write `frame` now; False (nothing written) when it is the stream's task's to send."""
        if self._send is None or self._finishing is not None:
            return False
        message: Message = {"type": "http.response.body", "body": frame.encode(), "more_body": True}
        step = self._send(message)
        if not isinstance(step, Coroutine):  # an awaitable of another kind: not steppable
            return _discard(step)
        try:
            waits_for = step.send(None)
        except StopIteration:
            return True
        except Exception:
            # Not written (a server raises before it writes): the stream's task sends the
            # frame and meets the error where the response handles it.
            return False
        self._finishing = asyncio.get_running_loop().create_task(_finish(step, waits_for))
        return True


def _discard(awaitable: Any) -> bool:
    close = getattr(awaitable, "close", None)
    if close is not None:
        close()
    return False


async def _finish(step: Coroutine[Any, Any, Any], waits_for: Any) -> None:
    """Drive a send that had to wait, as a task would: resume it each time what it waits for is
    done (it reads the outcome itself), until it returns."""
    try:
        while True:
            if waits_for is None:  # a bare yield: the next iteration
                await asyncio.sleep(0)
            else:
                await asyncio.wait([waits_for])
            try:
                waits_for = step.send(None)
            except StopIteration:
                return
    finally:
        step.close()  # a cancelled wait (shutdown): the send is abandoned with the response


class WritingEventSourceResponse(EventSourceResponse):
    """An `EventSourceResponse` that lends its `send` to `writer` while it runs."""

    def __init__(self, content: Any, *, writer: FrameWriter, ping: float) -> None:
        super().__init__(content, ping=ping)
        self._writer = writer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self._writer.attach(send)
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._writer.detach()

"""`FrameWriter`: a frame written from the task that has it, on the response's ASGI `send`.

The `send` here stands for the server's (the edge of the system): it writes at once, or first
waits for the socket to drain (a client that reads slowly), or raises before writing. The real
server path is covered by the streaming tests (tests/api/test_provisional_resume.py)."""

from __future__ import annotations

import asyncio

import pytest
from sse_starlette import ServerSentEvent
from starlette.types import Message

from pressloop.api.sse_now import FrameWriter

WAIT_S = 5.0


class ServerSend:
    """An ASGI `send` that records each body it writes, in order; while `paused` it waits for
    `drained` before writing, as a server does when its write buffer is full."""

    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.paused = False
        self.drained = asyncio.Event()
        self.abandoned = 0
        self.fail: Exception | None = None

    async def __call__(self, message: Message) -> None:
        if self.fail is not None:
            raise self.fail
        if self.paused:
            try:
                await self.drained.wait()
            except GeneratorExit:
                self.abandoned += 1
                raise
        self.written.append(message["body"])


def frame(n: int) -> ServerSentEvent:
    return ServerSentEvent(data=f"part {n}", event="message", id=f"1.{n}")


async def test_a_frame_goes_out_within_the_call_when_the_server_writes_at_once() -> None:
    send = ServerSend()
    writer = FrameWriter()
    assert writer.send_now(frame(1)) is False  # no response yet: the stream's task sends it
    writer.attach(send)
    assert writer.send_now(frame(1)) is True
    assert send.written == [frame(1).encode()]
    writer.detach()
    assert writer.send_now(frame(2)) is False
    assert send.written == [frame(1).encode()]


async def test_a_frame_that_waits_for_the_socket_keeps_its_place() -> None:
    """The first frame has to wait: it is still sent (by a task), the writer takes no other
    frame meanwhile, and the stream's next frame goes out only after it (`settled`)."""
    send = ServerSend()
    writer = FrameWriter()
    writer.attach(send)
    send.paused = True
    assert writer.send_now(frame(1)) is True
    assert send.written == []
    assert writer.send_now(frame(2)) is False  # the stream's task will send it

    async def stream_task_sends_next() -> None:
        await writer.settled()
        await send({"type": "http.response.body", "body": frame(2).encode(), "more_body": True})

    next_frame = asyncio.create_task(stream_task_sends_next())
    await asyncio.sleep(0.01)
    assert send.written == [] and not next_frame.done()
    send.paused = False
    send.drained.set()
    async with asyncio.timeout(WAIT_S):
        await next_frame
    assert send.written == [frame(1).encode(), frame(2).encode()]
    assert writer.send_now(frame(3)) is True  # settled: direct again
    assert send.written[-1] == frame(3).encode()


async def test_a_send_that_raises_writes_nothing_and_leaves_the_frame_to_the_stream() -> None:
    send = ServerSend()
    send.fail = RuntimeError("Unexpected ASGI message 'http.response.body' sent")
    writer = FrameWriter()
    writer.attach(send)
    assert writer.send_now(frame(1)) is False
    assert send.written == []


async def test_a_waiting_frame_is_abandoned_with_its_response() -> None:
    """Shutdown cancels the task finishing a frame: the server's send is closed, not left
    suspended, and the stream's task, if it waits to send, is not cancelled by it."""
    send = ServerSend()
    writer = FrameWriter()
    writer.attach(send)
    send.paused = True
    assert writer.send_now(frame(1)) is True
    finishing = writer._finishing
    assert finishing is not None
    await asyncio.sleep(0)
    finishing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await finishing
    assert send.abandoned == 1 and send.written == []

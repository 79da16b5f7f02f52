"""`pressloop serve`'s loop (runtime/loop_lanes.py): an urgent lane ahead of the rest, asyncio's
order kept everywhere else. Each ordering is checked against asyncio's own loop, where the same
code runs first in, first out."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
import uvloop
from pydantic import ValidationError

from pressloop.cli_serve import serving_loop
from pressloop.config import Settings
from pressloop.providers.base import (
    ModelRequest,
    ModelResponse,
    ResponseDone,
    StreamPart,
    TextDelta,
)
from pressloop.runtime.loop_lanes import LanesLoop, urgent
from pressloop.runtime.stream_urgency import UrgentStreams
from tests.support.processes import command, isolated_env

POLL_EVERY_S = 0.001


def run_on(
    loop_factory: Callable[[], asyncio.AbstractEventLoop], main: Coroutine[Any, Any, Any]
) -> Any:
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        return runner.run(main)


def lanes() -> LanesLoop:
    return LanesLoop(poll_every_s=POLL_EVERY_S)


async def _wakeup_behind_queued_work() -> list[str]:
    """Two callbacks are queued, then the future a task waits on is done: who runs first?"""
    loop = asyncio.get_running_loop()
    order: list[str] = []
    done: asyncio.Future[None] = loop.create_future()

    async def reader() -> bool:
        with urgent() as marked:
            await done
            order.append("woken")
        return marked

    task = asyncio.create_task(reader())
    await asyncio.sleep(0)  # the reader waits on `done`
    loop.call_soon(order.append, "queued 1")
    loop.call_soon(order.append, "queued 2")
    done.set_result(None)
    assert await task is isinstance(loop, LanesLoop)
    return order


def test_an_urgent_task_is_woken_ahead_of_work_queued_before() -> None:
    assert run_on(lanes, _wakeup_behind_queued_work()) == ["woken", "queued 1", "queued 2"]
    # asyncio's own loop (`urgent()` does nothing there): first in, first out.
    fifo = run_on(asyncio.new_event_loop, _wakeup_behind_queued_work())
    assert fifo == ["queued 1", "queued 2", "woken"]


async def _future_callbacks_and_a_wakeup() -> list[str]:
    """A future with a plain callback added before an urgent task waits on it; another urgent
    task is woken just before."""
    loop = asyncio.get_running_loop()
    order: list[str] = []
    first: asyncio.Future[None] = loop.create_future()
    done: asyncio.Future[None] = loop.create_future()
    done.add_done_callback(lambda _: order.append("callback added first"))

    async def reader(name: str, future: asyncio.Future[None]) -> None:
        with urgent():
            await future
            order.append(name)

    tasks = [
        asyncio.create_task(reader("other", first)),
        asyncio.create_task(reader("woken", done)),
    ]
    await asyncio.sleep(0)
    loop.call_soon(order.append, "queued")
    first.set_result(None)
    done.set_result(None)
    await asyncio.wait_for(asyncio.gather(*tasks), timeout=5)
    return order


def test_a_futures_earlier_callbacks_go_ahead_with_the_urgent_wakeup() -> None:
    # asyncio relies on a future's callbacks running in the order they were added.
    order = run_on(lanes, _future_callbacks_and_a_wakeup())
    assert order == ["other", "callback added first", "woken", "queued"]
    fifo = run_on(asyncio.new_event_loop, _future_callbacks_and_a_wakeup())
    assert fifo == ["queued", "other", "callback added first", "woken"]


async def _io_during_a_long_iteration() -> list[str]:
    """Three slow callbacks are queued; during the first, a byte reaches a socket."""
    loop = asyncio.get_running_loop()
    reader, writer = socket.socketpair()
    reader.setblocking(False)
    order: list[str] = []
    read = asyncio.Event()

    def on_read() -> None:
        reader.recv(16)
        order.append("read")
        read.set()

    def slow(name: str, send: bool = False) -> None:
        if send:
            writer.send(b"x")
        time.sleep(3 * POLL_EVERY_S)
        order.append(name)

    loop.add_reader(reader.fileno(), on_read)
    try:
        loop.call_soon(slow, "slow 1", True)
        loop.call_soon(slow, "slow 2")
        loop.call_soon(slow, "slow 3")
        await asyncio.wait_for(read.wait(), timeout=5)
        await asyncio.sleep(0)
    finally:
        loop.remove_reader(reader.fileno())
        reader.close()
        writer.close()
    return order


def test_sockets_are_polled_between_two_callbacks_of_a_long_iteration() -> None:
    order = run_on(lanes, _io_during_a_long_iteration())
    assert order == ["slow 1", "read", "slow 2", "slow 3"]
    fifo = run_on(asyncio.new_event_loop, _io_during_a_long_iteration())
    assert fifo == ["slow 1", "slow 2", "slow 3", "read"]


async def _connect_and_echo_while_urgent(errors: list[dict[str, Any]]) -> bytes:
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, context: errors.append(context))

    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(await reader.readline())
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        with urgent():
            replies = []
            for _ in range(20):
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(b"ping\n")
                replies.append(await reader.readline())
                writer.close()
                await writer.wait_closed()
    finally:
        server.close()
        await server.wait_closed()
    assert len(set(replies)) == 1
    return replies[0]


def test_an_urgent_task_connects_reads_and_writes_as_on_asyncios_loop() -> None:
    # A connection made from an urgent task: its `sock_connect` clean-up must still run
    # before the transport takes the socket (asyncio logs an error otherwise).
    errors: list[dict[str, Any]] = []
    assert run_on(lanes, _connect_and_echo_while_urgent(errors)) == b"ping\n"
    assert errors == []


async def _timers_due_together() -> list[str]:
    loop = asyncio.get_running_loop()
    order: list[str] = []
    loop.call_later(0.01, order.append, "due")
    loop.call_later(0.011, order.append, "cancelled").cancel()  # not at the heap's head
    loop.call_later(0.012, order.append, "due too")
    loop.call_soon(time.sleep, 0.02)  # the loop is busy while all three come due
    await asyncio.sleep(0.03)
    return order


def test_timers_that_come_due_together_run_and_cancelled_ones_do_not() -> None:
    assert run_on(lanes, _timers_due_together()) == ["due", "due too"]


async def _from_another_thread() -> list[str]:
    loop = asyncio.get_running_loop()
    order: list[str] = []
    done = asyncio.Event()

    def later() -> None:
        for n in range(50):
            loop.call_soon_threadsafe(order.append, f"thread {n}")
        loop.call_soon_threadsafe(done.set)

    thread = threading.Thread(target=later)
    thread.start()
    await asyncio.wait_for(done.wait(), timeout=5)
    thread.join()
    return order


def test_callbacks_from_another_thread_run_in_their_order() -> None:
    assert run_on(lanes, _from_another_thread()) == [f"thread {n}" for n in range(50)]


async def _marks() -> tuple[bool, bool, bool]:
    loop = asyncio.get_running_loop()
    assert isinstance(loop, LanesLoop)
    task = asyncio.current_task()
    with urgent() as marked:
        inside = task in loop.urgent_tasks
    return marked, inside, task in loop.urgent_tasks


def test_urgent_marks_the_task_only_while_it_lasts() -> None:
    assert run_on(lanes, _marks()) == (True, True, False)


class _TwoWords:
    """A model at the system's edge: two words, then its answer."""

    name = "two-words"
    model = "two-words"
    supports_tools = True

    def __init__(self) -> None:
        self.urgent_while_streaming: list[bool] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return ModelResponse(text="hello there")

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        loop = asyncio.get_running_loop()
        for word in ("hello", " there"):
            await asyncio.sleep(0)
            self.urgent_while_streaming.append(
                isinstance(loop, LanesLoop) and asyncio.current_task() in loop.urgent_tasks
            )
            yield TextDelta(text=word)
        yield ResponseDone(response=ModelResponse(text="hello there"))


async def _read_stream(model: _TwoWords) -> tuple[list[StreamPart], bool]:
    parts = [
        part async for part in UrgentStreams(model).stream(ModelRequest(system="", messages=[]))
    ]
    loop = asyncio.get_running_loop()
    after = isinstance(loop, LanesLoop) and asyncio.current_task() in loop.urgent_tasks
    return parts, after


@pytest.mark.parametrize("loop_factory", [lanes, asyncio.new_event_loop])
def test_a_stream_is_read_urgently_and_passed_through_unchanged(
    loop_factory: Callable[[], asyncio.AbstractEventLoop],
) -> None:
    model = _TwoWords()
    parts, urgent_after = run_on(loop_factory, _read_stream(model))
    assert [p.text for p in parts if isinstance(p, TextDelta)] == ["hello", " there"]
    assert isinstance(parts[-1], ResponseDone)
    expected = loop_factory is lanes
    assert model.urgent_while_streaming == [expected, expected]
    assert urgent_after is False


def test_serve_runs_on_the_lanes_loop_unless_told_uvloop() -> None:
    lanes_loop = serving_loop(Settings(loop_poll_every_s=0.002))
    uv_loop = serving_loop(Settings(event_loop="uvloop"))
    try:
        assert isinstance(lanes_loop, LanesLoop)
        assert lanes_loop._lanes._poll_every_s == 0.002
        assert isinstance(uv_loop, uvloop.Loop)
    finally:
        lanes_loop.close()
        uv_loop.close()
    with pytest.raises(ValidationError, match="event_loop|PRESSLOOP_EVENT_LOOP"):
        Settings(event_loop="trio")
    with pytest.raises(ValidationError, match="loop_poll_every_s|PRESSLOOP_LOOP_POLL_EVERY"):
        Settings(loop_poll_every_s=0)


def test_serve_with_an_unknown_loop_says_so_in_one_line(tmp_path: Path) -> None:
    env = isolated_env(PRESSLOOP_DATA_DIR=str(tmp_path), PRESSLOOP_EVENT_LOOP="trio")
    done = subprocess.run(
        [*command(), "serve", "--port", "0"], env=env, capture_output=True, timeout=60
    )
    assert done.returncode == 1
    err = done.stderr.decode()
    assert "PRESSLOOP_EVENT_LOOP" in err
    assert "Traceback" not in err and "never awaited" not in err

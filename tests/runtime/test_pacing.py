"""Pacing (runtime/pacing.py): work that can wait takes turns, one piece a loop iteration, so
the loop reads its sockets between two pieces; on asyncio's loop, on uvloop and on `pressloop
serve`'s loop (runtime/loop_lanes.py)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable

import pytest
import uvloop

from pressloop.runtime.loop_lanes import LanesLoop
from pressloop.runtime.pacing import Pacer

LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop,
    "uvloop": uvloop.new_event_loop,
    "lanes": LanesLoop,
}


async def _pieces_and_reads(pieces: int, pacer: Pacer | None) -> list[str]:
    """`pieces` tasks each write a byte to a socket once it is their turn; a reader on the
    other end logs each byte it reads. The log says what ran in which order."""
    loop = asyncio.get_running_loop()
    reader, writer = socket.socketpair()
    reader.setblocking(False)
    log: list[str] = []
    all_read = asyncio.Event()

    def on_read() -> None:
        for byte in reader.recv(64):
            log.append(f"read {byte}")
        if len(log) == 2 * pieces:
            all_read.set()

    loop.add_reader(reader.fileno(), on_read)

    async def piece(number: int) -> None:
        if pacer is not None:
            await pacer.turn()
        log.append(f"piece {number}")
        writer.send(bytes([number]))

    try:
        await asyncio.gather(*(piece(n) for n in range(pieces)))
        await asyncio.wait_for(all_read.wait(), timeout=5)
    finally:
        loop.remove_reader(reader.fileno())
        reader.close()
        writer.close()
    return log


@pytest.mark.parametrize("loop_name", sorted(LOOPS))
def test_the_loop_reads_its_sockets_between_two_pieces(loop_name: str) -> None:
    with asyncio.Runner(loop_factory=LOOPS[loop_name]) as runner:
        log = runner.run(_pieces_and_reads(6, Pacer()))
    pieces = [log.index(f"piece {n}") for n in range(6)]
    assert pieces == sorted(pieces)  # in the order they asked
    for n in range(4):
        # What piece n sent was read before piece n + 2 ran: the loop polled in between.
        assert log.index(f"read {n}") < pieces[n + 2], log


@pytest.mark.parametrize("loop_name", sorted(LOOPS))
def test_without_pacing_every_piece_runs_before_any_read(loop_name: str) -> None:
    """What the pacer changes: released at once, the pieces all run before the loop polls."""
    with asyncio.Runner(loop_factory=LOOPS[loop_name]) as runner:
        log = runner.run(_pieces_and_reads(6, None))
    assert log[:6] == [f"piece {n}" for n in range(6)]


async def test_a_cancelled_waiter_gives_its_turn_to_the_next() -> None:
    pacer = Pacer()
    order: list[str] = []

    async def wait(name: str) -> None:
        await pacer.turn()
        order.append(name)

    first, second, third = (asyncio.create_task(wait(n)) for n in ("first", "second", "third"))
    await asyncio.sleep(0)  # all three are waiting
    second.cancel()
    await asyncio.gather(first, third)
    assert order == ["first", "third"] and second.cancelled()
    # Idle again, the pacer lets the next one go at once.
    await asyncio.wait_for(wait("later"), timeout=1)
    assert order[-1] == "later"


def test_a_loop_that_stopped_with_waiters_does_not_block_the_next() -> None:
    pacer = Pacer()

    async def strand() -> None:
        for _ in range(3):
            asyncio.get_running_loop().create_task(pacer.turn())
        await asyncio.sleep(0)  # they asked for their turns; the loop stops before all are given

    first = asyncio.new_event_loop()
    first.run_until_complete(strand())
    stranded = asyncio.all_tasks(first)
    assert any(not task.done() for task in stranded)
    first.close()

    async def later() -> str:
        await asyncio.wait_for(pacer.turn(), timeout=1)
        return "went"

    assert asyncio.run(later()) == "went"


async def test_a_waiter_asked_first_goes_before_those_waiting() -> None:
    pacer = Pacer()
    order: list[str] = []

    async def wait(name: str, first: bool = False) -> None:
        await pacer.turn(first=first)
        order.append(name)

    queued = [asyncio.create_task(wait(n)) for n in ("step 1", "step 2", "step 3")]
    await asyncio.sleep(0)  # all three are waiting (the first may be let go meanwhile)
    await asyncio.gather(*queued, asyncio.create_task(wait("commit", first=True)))
    assert order[-2:] == ["step 2", "step 3"]  # in arrival order, it would be last
    assert sorted(order[:2]) == ["commit", "step 1"]

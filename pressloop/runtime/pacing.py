"""Pacing: work that can wait lets the event loop serve what cannot, one piece a loop iteration.

A loop runs every ready callback, in order, before it polls its sockets again; when 100 turns'
model answers land together, each turn's next step (its plan, its events, its next request)
runs before the loop reads anything else, and a stream's first token, already in the socket,
waits for all of them. A step that can wait a few milliseconds (a turn between two model calls)
asks `Pacer.turn()` first (the engine before each step, the group commit before each batch):
the pacer lets one waiter go each loop iteration, so between two such steps the loop polls
again and the tokens that came meanwhile go out first. With nothing else to do, an iteration
takes microseconds and the waiters follow each other at once: the pieces are reordered, not
slowed (1,000 turns at once took as long; benchmarks.md, section 3g).
"""

from __future__ import annotations

import asyncio
from collections import deque


class Pacer:
    """One waiter released a loop iteration, in arrival order (but for those asked `first`).

    Made before any loop runs (with its runner); it serves the loop its waiters run on, and a
    loop that stopped with waiters left (a closed test loop) leaves nothing that blocks the next.
    """

    def __init__(self) -> None:
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._granting_on: asyncio.AbstractEventLoop | None = None

    async def turn(self, *, first: bool = False) -> None:
        """Wait for this step's loop iteration; `first`: before every step waiting now (a
        person's stream waits for it)."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        if first:
            self._waiters.appendleft(waiter)
        else:
            self._waiters.append(waiter)
        if self._granting_on is not loop:
            self._granting_on = loop
            loop.call_soon(self._grant, loop)
        await waiter

    def _grant(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._granting_on is not loop:
            return  # another loop took over
        while self._waiters:
            waiter = self._waiters.popleft()
            # A cancelled waiter gives its place on; one of another loop is gone with it.
            if not waiter.done() and waiter.get_loop() is loop:
                waiter.set_result(None)
                break
        if self._waiters:
            loop.call_soon(self._grant, loop)
        else:
            self._granting_on = None

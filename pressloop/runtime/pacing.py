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
    """One waiter released a loop iteration, in arrival order."""

    def __init__(self) -> None:
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._granting = False

    async def turn(self) -> None:
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiters.append(waiter)
        if not self._granting:
            self._granting = True
            loop.call_soon(self._grant, loop)
        await waiter

    def _grant(self, loop: asyncio.AbstractEventLoop) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():  # a cancelled waiter gives its place on
                waiter.set_result(None)
                break
        if self._waiters:
            loop.call_soon(self._grant, loop)
        else:
            self._granting = False

"""In-process wake-ups for readers of run events.

Events are always read from the database (so any API process can serve any stream); the bus only
tells readers in this process that something new was committed, so they need not wait for the
next poll.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict


class EventBus:
    def __init__(self) -> None:
        self._waiters: dict[str, set[asyncio.Event]] = defaultdict(set)

    def notify(self, run_id: str) -> None:
        for waiter in self._waiters.get(run_id, ()):
            waiter.set()

    async def wait(self, run_id: str, timeout_s: float) -> None:
        """Return when `run_id` has news, or after `timeout_s` (callers re-read either way)."""
        waiter = asyncio.Event()
        self._waiters[run_id].add(waiter)
        try:
            async with asyncio.timeout(timeout_s):
                await waiter.wait()
        except TimeoutError:
            pass
        finally:
            self._waiters[run_id].discard(waiter)
            if not self._waiters[run_id]:
                del self._waiters[run_id]

    def subscribe(self, run_id: str) -> asyncio.Event:
        waiter = asyncio.Event()
        self._waiters[run_id].add(waiter)
        return waiter

    def unsubscribe(self, run_id: str, waiter: asyncio.Event) -> None:
        self._waiters[run_id].discard(waiter)
        if not self._waiters[run_id]:
            del self._waiters[run_id]

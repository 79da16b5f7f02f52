"""Lease renewal for every run of the process, from one task.

Every write a run makes renews its lease; a run that writes nothing for a while (a slow model
call) is renewed by this keeper. It looks every `renew_s / 2` and renews the runs idle for at
least that long, so no lease goes longer than about `renew_s` without renewal, whatever the
timing. One task for all runs (running only while there are runs) instead of a task and a
timer per run: with a thousand runs in flight that is a thousand fewer tasks to schedule.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping

from pressloop.clock import Monotonic
from pressloop.runtime.session import RunSession


class LeaseKeeper:
    def __init__(
        self,
        sessions: Mapping[str, RunSession],
        *,
        renew_s: float,
        monotonic: Monotonic = time.monotonic,
    ) -> None:
        self.sessions = sessions
        self.renew_s = renew_s
        self.monotonic = monotonic
        self._task: asyncio.Task[None] | None = None

    def watch(self) -> None:
        """A run started: make sure someone renews leases."""
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name="lease-keeper")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _loop(self) -> None:
        try:
            while self.sessions:
                await asyncio.sleep(self.renew_s / 2)
                idle_since = self.monotonic() - self.renew_s / 2
                for session in list(self.sessions.values()):
                    if session.last_written <= idle_since:
                        session.renew_soon()
        finally:
            self._task = None

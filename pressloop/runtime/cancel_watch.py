"""Cancels asked in another process, noticed within `poll_s` for every run of this process.

A cancel asked through this process stops its run at once (`Runner.signal_cancel`). One asked
through another process (an API process, for a run a `pressloop worker` runs) only sets the
run's `cancel_requested` flag; every commit of the run reads it back, but a run waiting on a
slow model writes nothing for seconds. So one task per process reads the flags of all the runs
it runs, every `poll_s` while it runs any, in one statement (one per 500 runs), and stops the
runs a person asked to cancel. Both databases; PostgreSQL's NOTIFY would save the reads, at the
cost of a listening connection in every worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping

from pressloop.runtime.session import RunSession
from pressloop.store import runs as run_store
from pressloop.store.db import Database

log = logging.getLogger(__name__)


class CancelWatch:
    def __init__(
        self, database: Database, sessions: Mapping[str, RunSession], *, poll_s: float
    ) -> None:
        self.database = database
        self.sessions = sessions
        self.poll_s = poll_s
        self._task: asyncio.Task[None] | None = None

    def watch(self) -> None:
        """A run started: make sure someone looks for its cancel."""
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name="cancel-watch")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def look(self) -> None:
        """Stop the runs of this process a person asked (anywhere) to cancel."""
        watched = [run_id for run_id, s in self.sessions.items() if not s.cancel_requested]
        if not watched:
            return
        try:
            async with self.database.read() as conn:
                asked = await run_store.cancels_requested(conn, watched)
        except Exception as exc:  # the next look, or the run's next commit, will find it
            log.warning("could not look for cancels: %s", exc)
            return
        for run_id in asked:
            session = self.sessions.get(run_id)
            if session is not None:
                session.request_cancel()

    async def _loop(self) -> None:
        try:
            while self.sessions:
                await asyncio.sleep(self.poll_s)
                await self.look()
        finally:
            self._task = None

"""PostgreSQL LISTEN/NOTIFY: which runs have new events, across processes.

A stream served by one process for a run another process runs (a background run taken by a
`pressloop worker`, a reconnect a load balancer sent elsewhere) would otherwise see new events
only at its next database poll. The group committer sends `NOTIFY pressloop_events, '<run id>'`
in the statement that commits a run's events (`store/batch_writes.py`; PostgreSQL delivers it at
the commit, never for a rolled-back one); every API process listens on one connection of its
own and wakes the readers of that run, who then read the events from the database as usual.
SQLite has no such thing (and one SQLite file serves one machine): its readers poll.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy.engine import make_url

log = logging.getLogger(__name__)

CHANNEL = "pressloop_events"


def listen_url(database_url: str) -> str:
    """The asyncpg DSN of a SQLAlchemy PostgreSQL URL."""
    url = make_url(database_url).set(drivername="postgresql")
    return url.render_as_string(hide_password=False)


class Listener:
    """Calls `on_run(run_id)` for every notification, on one connection of its own, and
    reconnects (after `retry_s`) when the connection is lost."""

    def __init__(
        self, database_url: str, on_run: Callable[[str], None], *, retry_s: float = 1.0
    ) -> None:
        self._dsn = listen_url(database_url)
        self._on_run = on_run
        self._retry_s = retry_s
        self.listening = asyncio.Event()

    async def run_forever(self) -> None:
        while True:
            try:
                await self._listen_once()
            except (OSError, asyncpg.PostgresError) as exc:
                log.warning("event notifications: %s; listening again soon", exc)
            self.listening.clear()
            await asyncio.sleep(self._retry_s)

    async def _listen_once(self) -> None:
        conn = await asyncpg.connect(self._dsn, timeout=10)
        lost = asyncio.Event()
        conn.add_termination_listener(lambda _conn: lost.set())
        try:
            await conn.add_listener(CHANNEL, self._received)
            self.listening.set()
            await lost.wait()
        finally:
            if not conn.is_closed():
                await conn.close()

    def _received(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        self._on_run(payload)

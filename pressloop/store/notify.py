"""PostgreSQL LISTEN/NOTIFY: which runs have new events, and that a run may be claimed, across
processes.

A stream served by one process for a run another process runs (a background run taken by a
`pressloop worker`, a reconnect a load balancer sent elsewhere) would otherwise see new events
only at its next database poll. The group committer sends `NOTIFY pressloop_events, '<run id>'`
in the statement that commits a run's events (`store/batch_writes.py`; PostgreSQL delivers it at
the commit, never for a rolled-back one); every API process listens on one connection of its
own and wakes the readers of that run, who then read the events from the database as usual.

A worker idle in another process, or on another machine, would otherwise start a queued run only
at its next poll (`PRESSLOOP_WORKER_POLL`): a chat turn queued by an API process that runs no
turns (`PRESSLOOP_SERVE_RUNS=0`), a thread's next message once the run before it ends, a
heartbeat, a resumed approval. Triggers on `runs` (migration 0011) send `NOTIFY pressloop_runs`
at the commit of a transaction that leaves a run claimable, and every listening worker looks for
work at once. The poll stays, for what no notification announces: a retry whose backoff ends,
a lease that expires, a notification sent while a listener was reconnecting.

SQLite has no such thing (and one SQLite file serves one machine): its readers and workers poll.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import sqlalchemy as sa
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection

log = logging.getLogger(__name__)

CHANNEL = "pressloop_events"  # payload: the id of a run with new events
RUNS_CHANNEL = "pressloop_runs"  # empty payload: some run may be claimed now


async def announce_claimable(conn: AsyncConnection) -> None:
    """At this transaction's commit, wake the listening workers for what makes queued runs
    claimable without changing them (the kill switch going off): the triggers see only `runs`.
    Nothing on SQLite."""
    if conn.dialect.name == "postgresql":
        await conn.execute(sa.select(sa.func.pg_notify(RUNS_CHANNEL, "")))


def listen_url(database_url: str) -> str:
    """The asyncpg DSN of a SQLAlchemy PostgreSQL URL."""
    url = make_url(database_url).set(drivername="postgresql")
    return url.render_as_string(hide_password=False)


class Listener:
    """Calls `channels[channel](payload)` for every notification, on one connection of its own,
    and reconnects (after `retry_s`) when the connection is lost. `on_listening` runs each time
    it listens again: what was sent while it did not listen is lost, so whoever relies on it
    looks once."""

    def __init__(
        self,
        database_url: str,
        channels: Mapping[str, Callable[[str], None]],
        *,
        retry_s: float = 1.0,
        on_listening: Callable[[], None] | None = None,
    ) -> None:
        self._dsn = listen_url(database_url)
        self._channels = dict(channels)
        self._retry_s = retry_s
        self._on_listening = on_listening
        self.listening = asyncio.Event()

    async def run_forever(self) -> None:
        while True:
            try:
                await self._listen_once()
            except (OSError, asyncpg.PostgresError) as exc:
                log.warning("notifications: %s; listening again soon", exc)
            self.listening.clear()
            await asyncio.sleep(self._retry_s)

    async def _listen_once(self) -> None:
        conn = await asyncpg.connect(self._dsn, timeout=10)
        lost = asyncio.Event()
        conn.add_termination_listener(lambda _conn: lost.set())
        try:
            for channel in self._channels:
                await conn.add_listener(channel, self._received)
            self.listening.set()
            if self._on_listening is not None:
                self._on_listening()
            await lost.wait()
        finally:
            if not conn.is_closed():
                await conn.close()

    def _received(self, _conn: Any, _pid: int, channel: str, payload: str) -> None:
        self._channels[channel](payload)

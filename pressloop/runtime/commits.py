"""Group commit: one task per process writes what many runs have pending, in one transaction.

Runs emit events, save checkpoints and ask for writes (ledger, approvals, their finish) through
their session (`runtime/session.py`). The committer takes the sessions with something pending,
up to `max_batch` at a time, and writes it all in one transaction, each run fenced by its own
lease token (`store/run_writes.py`). Why one writer for the process:
- a burst of hundreds of runs (their model calls come back together) shares a few transactions
  and statements instead of queueing for a pooled connection each;
- a run's writes stay in order without a task per run (one batch is in flight at a time);
- on SQLite it is the one writer, so run writes never wait on each other for the write lock.
A batch that fails is retried run by run, so only the run that caused the failure sees it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection

from pressloop.errors import LeaseLost
from pressloop.runtime.bus import EventBus
from pressloop.runtime.clock import Now
from pressloop.store import events as event_store
from pressloop.store import run_writes
from pressloop.store.db import Database
from pressloop.store.notify import notify_runs
from pressloop.store.run_writes import RunWrite

log = logging.getLogger(__name__)

Operation = Callable[[AsyncConnection], Awaitable[Any]]


@dataclass(kw_only=True)
class Pending:
    """What one run hands the committer: its fenced write, and who waits for the commit."""

    write: RunWrite
    operations: list[tuple[Operation, asyncio.Future[Any]]] = field(default_factory=list)
    # Run after the finish, in the same transaction (a spawned child reporting to its parent).
    after_finish: tuple[Operation, asyncio.Future[Any]] | None = None
    waiters: list[asyncio.Future[Any]] = field(default_factory=list)  # no value, just the commit
    on_done: Callable[[BaseException | None, bool], None] | None = None


class Committer:
    """Commits pending run writes in batches, one transaction at a time, from one task that
    runs while there is something to write (so there is nothing to start or stop)."""

    def __init__(
        self,
        database: Database,
        bus: EventBus,
        *,
        now: Now,
        lease_ttl_s: float,
        max_batch: int = 100,
    ) -> None:
        self.database = database
        self.bus = bus
        self.now = now
        self.lease_ttl_s = lease_ttl_s
        self.max_batch = max_batch
        self._dirty: dict[str, Callable[[], Pending]] = {}
        self._task: asyncio.Task[None] | None = None

    def mark(self, run_id: str, take: Callable[[], Pending]) -> None:
        """`run_id` has something to write; `take` hands it over when its batch starts."""
        self._dirty.setdefault(run_id, take)
        if self._task is None:
            self._task = asyncio.create_task(self._drain(), name="committer")

    def discard(self, run_id: str) -> None:
        """Forget what `run_id` has pending (its session failed)."""
        self._dirty.pop(run_id, None)

    async def close(self) -> None:
        """Wait for what is being written (the task ends by itself when nothing is left)."""
        if self._task is not None:
            await asyncio.shield(self._task)

    async def _drain(self) -> None:
        try:
            while self._dirty:
                batch: list[Pending] = []
                while self._dirty and len(batch) < self.max_batch:
                    run_id = next(iter(self._dirty))
                    batch.append(self._dirty.pop(run_id)())
                await self._commit(batch)
        finally:
            self._task = None

    async def _commit(self, batch: list[Pending]) -> None:
        try:
            held, results = await self._transaction(batch)
        except asyncio.CancelledError as stop:
            for pending in batch:
                _settle(pending, stop, {})
            raise
        except Exception as exc:
            if len(batch) > 1 and not _shared(exc):
                # Someone's operation failed: find out whose, one by one.
                for pending in batch:
                    await self._commit([pending])
                return
            for pending in batch:
                log.warning("run %s: write failed: %s", pending.write.run_id, exc)
                _settle(pending, exc, {})
            return
        for pending in batch:
            write = pending.write
            if write.run_id in held:
                _settle(pending, None, results, cancel=held[write.run_id])
                if write.events:
                    self.bus.publish(write.run_id, write.events)
            else:
                lost = LeaseLost(
                    f"run {write.run_id}: the lease (token {write.token}) is no longer ours"
                )
                log.warning("run %s: write failed: %s", write.run_id, lost.message)
                _settle(pending, lost, {})

    async def _transaction(self, batch: list[Pending]) -> tuple[dict[str, bool], dict[int, Any]]:
        now = self.now()
        results: dict[int, Any] = {}  # id(future) -> the operation's value
        async with self.database.write() as conn:
            held = await run_writes.fence_many(
                conn, [p.write for p in batch], now=now, ttl_s=self.lease_ttl_s
            )
            mine = [p for p in batch if p.write.run_id in held]
            await event_store.append_events(conn, [e for p in mine for e in p.write.events])
            # Readers in other processes (PostgreSQL): delivered at the commit.
            await notify_runs(conn, [p.write.run_id for p in mine if p.write.events])
            for pending in mine:
                for operation, future in pending.operations:
                    results[id(future)] = await operation(conn)
            await run_writes.finish_many(conn, [p.write for p in mine])
            for pending in mine:
                if pending.after_finish is not None:
                    operation, future = pending.after_finish
                    results[id(future)] = await operation(conn)
        return held, results


def _shared(error: Exception) -> bool:
    """A failure of the database or the connection, not of one run's write: retrying the runs
    one by one would only fail (or wait for a timeout) once per run."""
    if isinstance(error, DBAPIError) and error.connection_invalidated:
        return True
    return isinstance(error, OSError | TimeoutError | InterfaceError | OperationalError)


def _settle(
    pending: Pending,
    error: BaseException | None,
    results: dict[int, Any],
    *,
    cancel: bool = False,
) -> None:
    futures = [f for _op, f in pending.operations] + pending.waiters
    if pending.after_finish is not None:
        futures.append(pending.after_finish[1])
    if pending.on_done is not None:
        pending.on_done(error, cancel)
    for future in futures:
        if future.done():  # its waiter was cancelled
            continue
        if error is None:
            future.set_result(results.get(id(future)))
        elif isinstance(error, asyncio.CancelledError):
            future.cancel()
        else:
            future.set_exception(error)

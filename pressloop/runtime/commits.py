"""Group commit: one task per process writes what many runs have pending, in one transaction.

Runs emit events, save checkpoints and ask for writes (ledger, approvals, their finish) through
their session (`runtime/session.py`), which puts them in the run's `Outbox` (`runtime/outbox.py`).
The committer takes the outboxes with something pending, up to `max_batch` at a time, and writes
it all in one transaction, each run fenced by its own lease token (`store/run_writes.py`). Why one
writer for the process:
- a burst of hundreds of runs (their model calls come back together) shares a few transactions
  and statements instead of queueing for a pooled connection each;
- a run's writes stay in order without a task per run (one batch is in flight at a time);
- on SQLite it is the one writer, so run writes never wait on each other for the write lock.
A batch that fails is retried run by run, so only the run that caused the failure sees it.
The dependency is one-way: sessions call the committer; the committer knows only outboxes, and
answers through futures (an operation's value, each batch's `Committed` outcome).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

from pressloop.clock import Now
from pressloop.errors import LeaseLost
from pressloop.runtime.bus import EventBus
from pressloop.runtime.commit_loop import ONE_BATCH_AT_A_TIME, CommitLoop
from pressloop.runtime.outbox import Committed, Outbox, Pending
from pressloop.runtime.pacing import Pacer
from pressloop.store import batch_writes, run_writes
from pressloop.store.db import Database

log = logging.getLogger(__name__)


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
        max_batch: int = 25,
        commit_loop: CommitLoop | None = None,
        pacer: Pacer | None = None,
        gather_s: float = 0.0,
        in_flight: Callable[[], int] = lambda: 0,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        delta_commit_s: float = 0.0,
    ) -> None:
        self.database = database
        # Where the transactions run (PostgreSQL: a loop of their own, `commit_loop.py`).
        self.commit_loop = commit_loop
        # PostgreSQL: the batches' own connection, outside the pool. In a burst (200 streams
        # starting) every request and claim of the process queues for the pool's few
        # connections, and a batch that waited its turn among them held the first tokens of
        # the runs whose events it carried up to a second (benchmarks.md, section 3ae); SQLite's
        # group commit goes first among the writers already (`store/db.py`). One batch is in
        # flight at a time: one connection is all it uses. A commit loop has its own already.
        if commit_loop is not None:
            self.batch_database = commit_loop.database
        elif database.is_sqlite:
            self.batch_database = database
        else:
            self.batch_database = database.open_another(pool_size=ONE_BATCH_AT_A_TIME)
        self.bus = bus
        self.now = now
        self.lease_ttl_s = lease_ttl_s
        self.max_batch = max_batch
        # Asked before each batch (`runtime/pacing.py`): building a batch's statements is the
        # longest piece of CPU on the main loop, and a stream's token should not wait for it.
        self.pacer = pacer
        # Under load, a batch waits `gather_s` for the writes of the other runs in flight here
        # (`in_flight`): fewer, fuller transactions, so less CPU a run on the loop and in the
        # database (benchmarks.md, section 3h). A batch already full, or holding every run in
        # flight (one chat), goes at once.
        self.gather_s = gather_s
        self.in_flight = in_flight
        self.sleep = sleep
        # The outboxes with something to write, in the order they were marked (a dict as an
        # ordered set). Keyed by the outbox, not the run: a run's next attempt (a retry, claimed
        # here as soon as the last one's finish commits) has an outbox of its own, and the last
        # attempt's session, closing late, must neither drop it nor stand in for it.
        self._dirty: dict[Outbox, None] = {}
        # Those a person's stream waits for (`hurry`): they go before the others, and their
        # batch neither gathers nor waits behind the turns' paced steps.
        self._hurried: dict[Outbox, None] = {}
        # Text deltas a stream of this process has already sent wait up to `delta_commit_s`
        # (`mark(soon=True)`): all such outboxes go to the next batch together when it is up.
        # What they are written for (a reader in another process, a reconnect elsewhere) can
        # wait that long, and the commits they cost while hundreds of streams receive tokens
        # shrink to a few (docs/benchmarks.md, section 3k). 0: written as soon as marked.
        self.delta_commit_s = delta_commit_s
        self._soon: dict[Outbox, None] = {}
        self._soon_timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None

    def mark(self, outbox: Outbox, *, soon: bool = False) -> asyncio.Future[Committed]:
        """`outbox` has something to write: it goes with the next batch, whose outcome for the
        run is returned. `soon`: it may wait up to `delta_commit_s` (only text deltas were
        queued since its last write, and a stream of this process has sent them)."""
        if outbox in self._hurried:
            return outbox.next_commit()
        if soon and self.delta_commit_s > 0 and outbox not in self._dirty:
            self._soon[outbox] = None
            if self._soon_timer is None:
                loop = asyncio.get_running_loop()
                self._soon_timer = loop.call_later(self.delta_commit_s, self._soon_is_now)
            return outbox.next_commit()
        self._soon.pop(outbox, None)
        self._dirty[outbox] = None
        self._start()
        return outbox.next_commit()

    def hurry(self, outbox: Outbox) -> None:
        """A person's stream waits for what `outbox` holds (its run's next text part goes out
        after the events queued before it): its batch goes first, at once.

        Under load the committer runs behind the turns: a batch waits its turn among hundreds
        of paced steps, and a round's writes of 200 runs take several batches. The events before
        a streamed call then reached the database after its first token had come, and the token
        waited for them (benchmarks.md, section 3z)."""
        if outbox in self._dirty:
            del self._dirty[outbox]
        elif outbox in self._soon:
            del self._soon[outbox]
        else:
            return  # nothing queued: nothing to wait for
        self._hurried[outbox] = None
        self._start()

    def _soon_is_now(self) -> None:
        self._soon_timer = None
        self._dirty.update(self._soon)
        self._soon.clear()
        if self._dirty:
            self._start()

    def _start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._drain(), name="committer")

    def forget(self, outbox: Outbox) -> None:
        """Write nothing more from `outbox` (its session closed: a renewal asked for after the
        run's last write would only find its lease gone)."""
        self._dirty.pop(outbox, None)
        self._hurried.pop(outbox, None)
        self._soon.pop(outbox, None)

    async def close(self) -> None:
        """Write what waits (the deltas too) and wait for what is being written (the task ends
        by itself when nothing is left)."""
        if self._soon_timer is not None:
            self._soon_timer.cancel()
            self._soon_is_now()
        if self._task is not None:
            await asyncio.shield(self._task)
        if self.commit_loop is not None:
            await self.commit_loop.close()
        elif self.batch_database is not self.database:
            await self.batch_database.close()

    async def _drain(self) -> None:
        try:
            while self._dirty or self._hurried:
                if self._gathering():
                    await self.sleep(self.gather_s)
                if self.pacer is not None:
                    await self.pacer.turn(first=bool(self._hurried))
                await self._commit(self._next_batch())
        finally:
            self._task = None

    def _gathering(self) -> bool:
        """Whether to wait for more runs' writes before this batch: only while more runs are in
        flight here than it would hold."""
        if self._hurried:
            return False
        pending = len(self._dirty)
        return self.gather_s > 0 and pending < min(self.max_batch, self.in_flight())

    def _next_batch(self) -> list[Pending]:
        """Up to `max_batch` outboxes, the hurried first, then first marked first, at most one
        of each run: the fence is by run, so two attempts' outboxes (the last one's stale token,
        the next one's) go in separate batches (the stale one then fails alone with its lost
        lease)."""
        batch: list[Pending] = []
        runs: set[str] = set()
        for queue in (self._hurried, self._dirty):
            for outbox in list(queue):
                if len(batch) == self.max_batch:
                    return batch
                if outbox.run_id not in runs:
                    runs.add(outbox.run_id)
                    del queue[outbox]
                    batch.append(outbox.take())
        return batch

    async def _commit(self, batch: list[Pending]) -> None:
        try:
            held, results = await self._transaction(batch)
        except asyncio.CancelledError as stop:
            for pending in batch:
                self._settle(pending, stop, {})
            raise
        except Exception as exc:
            if len(batch) > 1 and not _shared(exc):
                # Someone's operation failed: find out whose, one by one.
                for pending in batch:
                    await self._commit([pending])
                return
            for pending in batch:
                log.warning("run %s: write failed: %s", pending.write.run_id, exc)
                self._settle(pending, exc, {})
            return
        for pending in batch:
            write = pending.write
            if write.run_id in held:
                self._settle(pending, None, results, cancel=held[write.run_id])
                if write.events:
                    self.bus.publish(write.run_id, write.events)
            else:
                lost = LeaseLost(
                    f"run {write.run_id}: the lease (token {write.token}) is no longer ours"
                )
                log.warning("run %s: write failed: %s", write.run_id, lost.message)
                self._settle(pending, lost, {})

    async def _transaction(self, batch: list[Pending]) -> tuple[dict[str, bool], dict[int, Any]]:
        """The batch's transaction: here, or on the commit loop (PostgreSQL)."""
        now = self.now()
        if self.commit_loop is None:
            return await self._write(self.batch_database, batch, now)
        return await self.commit_loop.run(lambda database: self._write(database, batch, now))

    async def _write(
        self, database: Database, batch: list[Pending], now: datetime
    ) -> tuple[dict[str, bool], dict[int, Any]]:
        """The batch's transaction on `database`. On the commit loop it runs there, so it
        touches nothing but its connection and the batch (the write operations included)."""
        results: dict[int, Any] = {}  # id(future) -> the operation's value
        writes = [p.write for p in batch]
        if batch_writes.one_statement(writes) and not any(
            p.operations or p.after_finish for p in batch
        ):
            # The fence, the events and the finishes only: one statement on PostgreSQL, no
            # transaction around it (`store/batch_writes.py`).
            async with database.write_one_statement() as conn:
                held = await batch_writes.fence_and_append(
                    conn, writes, now=now, ttl_s=self.lease_ttl_s, finish=True
                )
            return held, results
        async with database.write(first=True) as conn:
            held = await batch_writes.fence_and_append(
                conn, writes, now=now, ttl_s=self.lease_ttl_s
            )
            mine = [p for p in batch if p.write.run_id in held]
            for pending in mine:
                for operation, future in pending.operations:
                    results[id(future)] = await operation(conn)
            await run_writes.finish_many(conn, [p.write for p in mine])
            for pending in mine:
                if pending.after_finish is not None:
                    operation, future = pending.after_finish
                    results[id(future)] = await operation(conn)
        return held, results

    def _settle(
        self,
        pending: Pending,
        error: BaseException | None,
        results: dict[int, Any],
        *,
        cancel: bool = False,
    ) -> None:
        futures = [f for _op, f in pending.operations] + pending.waiters
        if pending.after_finish is not None:
            futures.append(pending.after_finish[1])
        # The outcome first: the session learns it (a cancel, a failure) before its waiters resume.
        pending.committed.set_result(Committed(error=error, cancel_requested=cancel))
        if error is not None:
            pending.outbox.fail(error)
            self.forget(pending.outbox)
        for future in futures:
            if future.done():  # its waiter was cancelled
                continue
            if error is None:
                future.set_result(results.get(id(future)))
            elif isinstance(error, asyncio.CancelledError):
                future.cancel()
            else:
                future.set_exception(error)


def _shared(error: Exception) -> bool:
    """A failure of the database or the connection, not of one run's write: retrying the runs
    one by one would only fail (or wait for a timeout) once per run."""
    if isinstance(error, DBAPIError) and error.connection_invalidated:
        return True
    return isinstance(error, OSError | TimeoutError | InterfaceError | OperationalError)

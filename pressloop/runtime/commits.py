"""Group commit: one task per process writes what many runs have pending, in one transaction.

Runs emit events, save checkpoints and ask for writes (ledger, approvals, their finish) through
their session (`runtime/session.py`), which puts them in the run's `Outbox`. The committer takes
the outboxes with something pending, up to `max_batch` at a time, and writes it all in one
transaction, each run fenced by its own lease token (`store/run_writes.py`). Why one writer for
the process:
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
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection

from pressloop.clock import Now
from pressloop.contracts import Event, EventType
from pressloop.errors import LeaseLost
from pressloop.runtime.bus import EventBus, is_delta
from pressloop.runtime.commit_loop import CommitLoop
from pressloop.store import batch_writes, run_writes
from pressloop.store.db import Database
from pressloop.store.run_writes import FinishWrite, RunWrite

log = logging.getLogger(__name__)

Operation = Callable[[AsyncConnection], Awaitable[Any]]


@dataclass(kw_only=True, frozen=True)
class Committed:
    """How one batch went for one run: the error that failed it, or whether a person asked (in
    any process) to cancel the run, read back by the commit."""

    error: BaseException | None = None
    cancel_requested: bool = False


class Outbox:
    """What one run has to write until its batch starts: events (numbered here), the newest
    checkpoint, operations, the finish, and who waits for the commit.

    The run's session puts writes here and marks the outbox (`Committer.mark`); the committer
    takes everything at once when the run's batch starts, so what piles up during a commit
    shares the next one. The outcome comes back as the value of `next_commit()`; a failed
    batch fails the outbox for good (`failure`): the run writes nothing more.
    """

    def __init__(self, *, run_id: str, thread_id: str, token: int, last_seq: int) -> None:
        self.run_id = run_id
        self.thread_id = thread_id
        self.token = token
        self.seq = last_seq
        self.failure: BaseException | None = None
        self.events: list[Event] = []
        self.checkpoint: dict[str, Any] | None = None
        # The run's trace context, to store with the next write (its first traced attempt).
        self.trace_context: dict[str, str] | None = None
        self.finish: FinishWrite | None = None
        self.operations: list[tuple[Operation, asyncio.Future[Any]]] = []
        # Run after the finish, in the same transaction (a spawned child reporting to its parent).
        self.after_finish: tuple[Operation, asyncio.Future[Any]] | None = None
        self.waiters: list[asyncio.Future[Any]] = []  # no value, just the commit
        # The lengths of the parts merged into the last queued event, if it is a text delta.
        self._parts: list[int] = []
        self._committed: asyncio.Future[Committed] | None = None

    def add_event(self, type_: EventType, data: dict[str, Any], ts: datetime) -> int:
        """Number the event and queue it, or merge it into the text delta queued just before;
        for a text delta, return its part number within its event (1 for a new event), else 0.

        A streamed answer emits one `message` delta per token; when the commits cannot keep up
        (many streams at once) the deltas that pile up before the next batch become one event
        with the same text, so the rows written and the frames sent shrink with the load instead
        of the latency growing with it. An idle process commits each delta on its own. The
        merged event records each part's length (`"parts"`): the parts went to this process's
        streams before the commit (`EventBus.publish_part`), and a stream that resumes after
        part k (in any process) sends only the text after it.
        """
        delta = is_delta(type_, data)
        last = self.events[-1] if self.events else None
        if delta and last is not None and self._parts and last.type is type_:
            self._parts.append(len(data["delta"]))
            merged = {"delta": last.data["delta"] + data["delta"]}
            self.events[-1] = last.model_copy(update={"data": merged})
            return len(self._parts)
        self._seal()
        self.seq += 1
        self.events.append(
            Event(
                run_id=self.run_id,
                thread_id=self.thread_id,
                seq=self.seq,
                type=type_,
                ts=ts,
                data=data,
            )
        )
        self._parts = [len(data["delta"])] if delta else []
        return 1 if delta else 0

    @property
    def unsaved(self) -> bool:
        """Events or a checkpoint wait for a commit (nobody waits for them)."""
        return bool(self.events) or self.checkpoint is not None

    def next_commit(self) -> asyncio.Future[Committed]:
        """How the batch that takes what is queued now goes."""
        if self._committed is None:
            self._committed = asyncio.get_running_loop().create_future()
        return self._committed

    def take(self) -> Pending:
        """Everything queued, for the batch that starts now."""
        self._seal()
        write = RunWrite(
            run_id=self.run_id,
            thread_id=self.thread_id,
            token=self.token,
            event_seq=self.seq,
            events=self.events,
            checkpoint=self.checkpoint,
            finish=self.finish,
            trace_context=self.trace_context,
        )
        if write.finish is not None:
            write.finish.values["event_seq"] = self.seq
            if write.trace_context is not None:  # a lone finish is not fenced: it carries it
                write.finish.values["trace_context"] = write.trace_context
        pending = Pending(
            outbox=self,
            write=write,
            operations=self.operations,
            after_finish=self.after_finish,
            waiters=self.waiters,
            committed=self.next_commit(),
        )
        self._committed = None
        self._clear()
        return pending

    def _seal(self) -> None:
        """The last queued event takes no more parts: a merged delta records their lengths (one
        part needs no list: it is the whole text)."""
        if len(self._parts) > 1:
            last = self.events[-1]
            self.events[-1] = last.model_copy(update={"data": {**last.data, "parts": self._parts}})
        self._parts = []

    def fail(self, error: BaseException) -> None:
        """A batch of this run failed: what was queued after it cannot be written either."""
        self.failure = error
        futures = [f for _op, f in self.operations] + self.waiters
        if self.after_finish is not None:
            futures.append(self.after_finish[1])
        committed, self._committed = self._committed, None
        self._clear()
        if committed is not None:
            committed.set_result(Committed(error=error))
        for future in futures:
            if not future.done():
                future.set_exception(error)

    def _clear(self) -> None:
        self.events, self.operations, self.waiters, self._parts = [], [], [], []
        self.checkpoint, self.finish, self.after_finish = None, None, None
        self.trace_context = None


@dataclass(kw_only=True)
class Pending:
    """One run's share of a batch: its fenced write, and who waits for the commit."""

    outbox: Outbox
    write: RunWrite
    operations: list[tuple[Operation, asyncio.Future[Any]]] = field(default_factory=list)
    after_finish: tuple[Operation, asyncio.Future[Any]] | None = None
    waiters: list[asyncio.Future[Any]] = field(default_factory=list)
    committed: asyncio.Future[Committed]


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
        pace: Callable[[], Awaitable[None]] | None = None,
        gather_s: float = 0.0,
        in_flight: Callable[[], int] = lambda: 0,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        delta_commit_s: float = 0.0,
    ) -> None:
        self.database = database
        # Where the transactions run (PostgreSQL: a loop of their own, `commit_loop.py`).
        self.commit_loop = commit_loop
        self.bus = bus
        self.now = now
        self.lease_ttl_s = lease_ttl_s
        self.max_batch = max_batch
        # Awaited before each batch (`runtime/pacing.py`): building a batch's statements is the
        # longest piece of CPU on the main loop, and a stream's token should not wait for it.
        self.pace = pace
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

    async def _drain(self) -> None:
        try:
            while self._dirty:
                if self._gathering():
                    await self.sleep(self.gather_s)
                if self.pace is not None:
                    await self.pace()
                await self._commit(self._next_batch())
        finally:
            self._task = None

    def _gathering(self) -> bool:
        """Whether to wait for more runs' writes before this batch: only while more runs are in
        flight here than it would hold."""
        pending = len(self._dirty)
        return self.gather_s > 0 and pending < min(self.max_batch, self.in_flight())

    def _next_batch(self) -> list[Pending]:
        """Up to `max_batch` outboxes, first marked first, at most one of each run: the fence
        is by run, so two attempts' outboxes (the last one's stale token, the next one's) go in
        separate batches (the stale one then fails alone with its lost lease)."""
        batch: list[Pending] = []
        runs: set[str] = set()
        for outbox in list(self._dirty):
            if len(batch) == self.max_batch:
                break
            if outbox.run_id not in runs:
                runs.add(outbox.run_id)
                del self._dirty[outbox]
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
            return await self._write(self.database, batch, now)
        return await self.commit_loop.run(lambda database: self._write(database, batch, now))

    async def _write(
        self, database: Database, batch: list[Pending], now: datetime
    ) -> tuple[dict[str, bool], dict[int, Any]]:
        """The batch's transaction on `database`. On the commit loop it runs there, so it
        touches nothing but its connection and the batch (the write operations included)."""
        results: dict[int, Any] = {}  # id(future) -> the operation's value
        writes = [p.write for p in batch]
        if not any(p.operations or p.after_finish or p.write.finish for p in batch):
            # The fence and the events only: one statement on PostgreSQL, no transaction
            # around it (`store/batch_writes.py`).
            async with database.write_one_statement() as conn:
                held = await batch_writes.fence_and_append(
                    conn, writes, now=now, ttl_s=self.lease_ttl_s
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

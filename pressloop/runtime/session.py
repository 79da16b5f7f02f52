"""One claimed run's link to the database: numbered events, checkpoints, lease renewal, finish.

The session keeps what its run has to write (events, the newest checkpoint, operations such as
ledger entries, the finish) and hands it to the process's committer (`runtime/commits.py`),
which writes it together with other runs' in one transaction. Every write renews the lease and
checks the fencing token; a worker that lost its lease finds out at its next write and stops: it
can never commit for a run another worker took over. Events and checkpoints do not wait for
their commit; operations and the finish do, and they are written after every event and
checkpoint queued before them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from sqlalchemy.ext.asyncio import AsyncConnection

from pressloop.contracts import Checkpoint, Event, EventType
from pressloop.runtime.clock import Now
from pressloop.runtime.commits import Committer, Operation, Pending
from pressloop.store.db import Database
from pressloop.store.records import Claim
from pressloop.store.run_writes import FinishWrite, RunWrite

log = logging.getLogger(__name__)

T = TypeVar("T")


class RunSession:
    def __init__(
        self,
        *,
        database: Database,
        claim: Claim,
        committer: Committer,
        now: Now,
        last_seq: int,
    ) -> None:
        self.database = database
        self.claim = claim
        self.committer = committer
        self.now = now
        self.seq = last_seq
        # When the lease was last renewed (monotonic): the claim, then every commit.
        self.last_written = time.monotonic()
        self.cancel_requested = claim.run.cancel_requested
        # The task running the turn while it runs: a cancel request cancels it (the runner).
        self.turn: asyncio.Task[Any] | None = None
        self.last_checkpoint: Checkpoint | None = None
        self.failure: BaseException | None = None
        self._events: list[Event] = []
        self._operations: list[tuple[Operation, asyncio.Future[Any]]] = []
        self._checkpoint: dict[str, Any] | None = None
        self._finish: FinishWrite | None = None
        self._after_finish: tuple[Operation, asyncio.Future[Any]] | None = None
        self._waiters: list[asyncio.Future[Any]] = []
        self._closed = False

    @property
    def run_id(self) -> str:
        return self.claim.run.id

    async def emit(self, type_: EventType, data: dict[str, Any]) -> None:
        """Queue an event; it is committed with the next write (without waiting for it)."""
        self._raise_if_failed()
        self.seq += 1
        self._events.append(
            Event(
                run_id=self.run_id,
                thread_id=self.claim.run.thread_id,
                seq=self.seq,
                type=type_,
                ts=self.now(),
                data=data,
            )
        )
        self._mark()

    async def write(self, operation: Callable[[AsyncConnection], Awaitable[T]]) -> T:
        """Commit `operation` (after every event emitted before it); return what it returned."""
        self._raise_if_failed()
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._operations.append((operation, future))
        self._mark()
        return await future

    async def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        """Queue the checkpoint without waiting for its commit.

        Only the newest pending checkpoint is written, with the next group commit. Nothing is
        lost by not waiting: every write or destructive action waits for its ledger intent to
        commit, and that commit carries the checkpoint first, so no effect ever precedes the
        record of the model answer that asked for it. A crash can only cost re-asking the model
        or re-running a read.
        """
        self._raise_if_failed()
        self._checkpoint = checkpoint.model_dump(mode="json")
        self.last_checkpoint = checkpoint
        self._mark()

    async def finish(self, finish: FinishWrite, after: Operation | None = None) -> Any:
        """Move the run out of `running` (fenced, after everything queued before) and wait for
        the commit; `after` runs in the same transaction and its value is returned."""
        self._raise_if_failed()
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._finish = finish
        if after is not None:
            self._after_finish = (after, future)
        else:
            self._waiters.append(future)
        self._mark()
        return await future

    async def renew(self) -> None:
        """Renew the lease now (with whatever is pending) and wait for the commit."""
        self._raise_if_failed()
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiters.append(future)
        self._mark()
        await future

    def renew_soon(self) -> None:
        """Renew the lease with the next group commit, without waiting (`runtime/leases.py`)."""
        if self.failure is None and not self._closed:
            self._mark()

    async def close(self) -> None:
        """Write what is left (a failed session writes nothing more); after that, nothing."""
        if self.failure is None and (self._events or self._checkpoint is not None):
            with contextlib.suppress(Exception):
                await self.renew()
        self._closed = True
        # A renewal asked for after the run's last write would only find its lease gone.
        self.committer.discard(self.run_id)

    def request_cancel(self) -> None:
        """A person asked to stop the run: stop the turn now, whatever it awaits (a model
        answer, an action, a write); the runner then settles what was in flight."""
        first = not self.cancel_requested
        self.cancel_requested = True
        if first and self.turn is not None and not self.turn.done():
            self.turn.cancel()

    def _raise_if_failed(self) -> None:
        if self.failure is not None:
            raise self.failure

    def _mark(self) -> None:
        self.committer.mark(self.run_id, self._take)

    def _take(self) -> Pending:
        """Hand everything pending to the committer (its batch starts now)."""
        if len(self._events) > 1:
            self._events = _coalesce_deltas(self._events)
            self.seq = self._events[-1].seq
        write = RunWrite(
            run_id=self.run_id,
            thread_id=self.claim.run.thread_id,
            token=self.claim.token,
            event_seq=self.seq,
            events=self._events,
            checkpoint=self._checkpoint,
            finish=self._finish,
        )
        if write.finish is not None:
            write.finish.values["event_seq"] = self.seq
        pending = Pending(
            write=write,
            operations=self._operations,
            after_finish=self._after_finish,
            waiters=self._waiters,
            on_done=self._done,
        )
        self._events, self._operations, self._waiters = [], [], []
        self._checkpoint, self._finish, self._after_finish = None, None, None
        return pending

    def _done(self, error: BaseException | None, cancel: bool) -> None:
        if error is None:
            self.last_written = time.monotonic()
            if cancel:  # asked in another process: learnt from this commit
                self.request_cancel()
            return
        self.failure = error
        # What was queued after the failed batch cannot be written either.
        self.committer.discard(self.run_id)
        futures = [f for _op, f in self._operations] + self._waiters
        if self._after_finish is not None:
            futures.append(self._after_finish[1])
        self._events, self._operations, self._waiters = [], [], []
        self._checkpoint, self._finish, self._after_finish = None, None, None
        for future in futures:
            if not future.done():
                future.set_exception(error)


def _coalesce_deltas(events: list[Event]) -> list[Event]:
    """Merge text deltas that wait for the same commit, and number the events again.

    A streamed answer emits one `message` delta per token; when the commits cannot keep up (many
    streams at once) the deltas that piled up since the last commit become one event with the
    same text, so the rows written and the frames sent shrink with the load instead of the
    latency growing with it. An idle process commits each delta on its own.
    """
    merged: list[Event] = []
    for event in events:
        last = merged[-1] if merged else None
        if last is not None and _is_delta(last) and _is_delta(event):
            merged[-1] = last.model_copy(
                update={"data": {"delta": last.data["delta"] + event.data["delta"]}}
            )
        else:
            merged.append(event)
    if len(merged) == len(events):
        return events
    first = events[0].seq
    return [
        e if e.seq == first + i else e.model_copy(update={"seq": first + i})
        for i, e in enumerate(merged)
    ]


def _is_delta(event: Event) -> bool:
    return event.type is EventType.MESSAGE and event.data.keys() == {"delta"}

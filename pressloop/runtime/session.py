"""One claimed run's link to the database: numbered events, checkpoints, lease renewal, finish.

The session puts what its run has to write (events, the newest checkpoint, operations such as
ledger entries, the finish) in the run's outbox and marks it for the process's committer
(`runtime/commits.py`), which writes it together with other runs' in one transaction and answers
through futures: an operation's value, and each batch's outcome (a failure, a cancel asked).
Every write renews the lease and checks the fencing token; a worker that lost its lease finds out
at its next write and stops: it can never commit for a run another worker took over. Events and
checkpoints do not wait for their commit; operations and the finish do, and they are written
after every event and checkpoint queued before them. A text delta also goes to this process's
streams at once, before its commit, as a provisional part (`runtime/bus.py`): the first token
reaches the person without waiting for the database.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from sqlalchemy.ext.asyncio import AsyncConnection

from pressloop.clock import Monotonic, Now
from pressloop.contracts import Checkpoint, EventType
from pressloop.runtime.bus import Part
from pressloop.runtime.commits import Committer
from pressloop.runtime.outbox import Committed, Operation, Outbox
from pressloop.store.db import Database
from pressloop.store.records import Claim
from pressloop.store.run_writes import FinishWrite

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
        monotonic: Monotonic = time.monotonic,
    ) -> None:
        self.database = database
        self.claim = claim
        self.committer = committer
        self.now = now
        self.monotonic = monotonic
        # When the lease was last renewed (monotonic): the claim, then every commit.
        self.last_written = monotonic()
        self.cancel_requested = claim.run.cancel_requested
        # The task running the turn while it runs: a cancel request cancels it (the runner).
        self.turn: asyncio.Task[Any] | None = None
        self.last_checkpoint: Checkpoint | None = None
        self._outbox = Outbox(
            run_id=claim.run.id, thread_id=claim.run.thread_id, token=claim.token, last_seq=last_seq
        )
        # The outcome of the batch that takes what is queued now (watched once).
        self._next_commit: asyncio.Future[Committed] | None = None
        self._closed = False

    @property
    def run_id(self) -> str:
        return self.claim.run.id

    @property
    def seq(self) -> int:
        """The run's newest event number."""
        return self._outbox.seq

    def text_position(self) -> tuple[int, int]:
        """Where the next `message` delta goes (`Outbox.text_position`)."""
        return self._outbox.text_position(EventType.MESSAGE)

    @property
    def failure(self) -> BaseException | None:
        """Why a write failed, if one did: after that the session writes nothing more."""
        return self._outbox.failure

    async def emit(self, type_: EventType, data: dict[str, Any]) -> None:
        """Queue an event; it is committed with the next write (without waiting for it). A text
        delta is also handed to this process's streams now, as a provisional part."""
        self._raise_if_failed()
        ts = self.now()
        part = self._outbox.add_event(type_, data, ts)
        bus = self.committer.bus
        streamed = bool(part) and bus.streamed(self.run_id)
        # A delta a stream sends now (here, or a stream process) need not hurry to the database
        # (`Committer.mark`); one nobody streams goes at once: a reader elsewhere has only the
        # database. Hurried, a stream process's runs' deltas were most of the group commits,
        # and the events before the next call waited behind them (benchmarks.md, section 3z).
        self._mark(soon=streamed)
        if streamed and bus.wants_parts(self.run_id):  # a part only for a stream here
            run = self.claim.run
            bus.publish_part(
                Part(run.id, run.thread_id, self._outbox.seq, part, type_, ts, data["delta"])
            )

    def hurry(self) -> None:
        """The run's next text is on its way to a person: what is queued before it is written
        first (`Committer.hurry`), so its parts need not wait for it."""
        if self.failure is None and not self._closed and self.committer.bus.streamed(self.run_id):
            self.committer.hurry(self._outbox)

    def keep_trace_context(self, carrier: dict[str, str]) -> None:
        """Store the run's trace context with its next write (its first traced attempt)."""
        self._outbox.trace_context = carrier

    async def write(self, operation: Callable[[AsyncConnection], Awaitable[T]]) -> T:
        """Commit `operation` (after every event emitted before it); return what it returned."""
        self._raise_if_failed()
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._outbox.operations.append((operation, future))
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
        self._outbox.checkpoint = checkpoint.model_dump(mode="json")
        self.last_checkpoint = checkpoint
        self._mark()

    async def finish(self, finish: FinishWrite, after: Operation | None = None) -> Any:
        """Move the run out of `running` (fenced, after everything queued before) and wait for
        the commit; `after` runs in the same transaction and its value is returned."""
        self._raise_if_failed()
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._outbox.finish = finish
        if after is not None:
            self._outbox.after_finish = (after, future)
        else:
            self._outbox.waiters.append(future)
        self._mark()
        return await future

    async def renew(self) -> None:
        """Renew the lease now (with whatever is pending) and wait for the commit."""
        self._raise_if_failed()
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._outbox.waiters.append(future)
        self._mark()
        await future

    def renew_soon(self) -> None:
        """Renew the lease with the next group commit, without waiting (`runtime/leases.py`)."""
        if self.failure is None and not self._closed:
            self._mark()

    async def close(self) -> None:
        """Write what is left (a failed session writes nothing more); after that, nothing."""
        if self.failure is None and self._outbox.unsaved:
            with contextlib.suppress(Exception):
                await self.renew()
        self._closed = True
        self.committer.forget(self._outbox)

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

    def _mark(self, *, soon: bool = False) -> None:
        committed = self.committer.mark(self._outbox, soon=soon)
        if committed is not self._next_commit:
            self._next_commit = committed
            committed.add_done_callback(self._committed)

    def _committed(self, outcome: asyncio.Future[Committed]) -> None:
        """A batch with this run's writes is over (its failure is the outbox's already)."""
        committed = outcome.result()
        if committed.error is not None:
            # What it streamed before the commit will never be committed: readers forget the
            # parts they hold (those sent are followed by the retry's events).
            self.committer.bus.withdraw_parts(self.run_id)
        else:
            self.last_written = self.monotonic()
            if committed.cancel_requested:  # asked in another process: learnt from this commit
                self.request_cancel()

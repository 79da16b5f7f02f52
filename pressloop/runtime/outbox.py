"""What one run has to write until its batch starts (`Outbox`), its share of a batch (`Pending`)
and how the batch went for it (`Committed`).

The run's session (`runtime/session.py`) queues its events, checkpoint, operations and finish in
its outbox; the group committer (`runtime/commits.py`) takes them when the run's batch starts and
answers through the futures here. Nothing in this module touches the database.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from pressloop.contracts import Event, EventType
from pressloop.runtime.bus import is_delta
from pressloop.store.run_writes import FinishWrite, RunWrite

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

    def text_position(self, type_: EventType) -> tuple[int, int]:
        """Where a text delta of `type_` emitted now goes: after event `base`, as part
        `offset + 1` of the event after it (`offset` > 0: it joins the delta queued last)."""
        last = self.events[-1] if self.events else None
        if last is not None and self._parts and last.type is type_:
            return self.seq - 1, len(self._parts)
        return self.seq, 0

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

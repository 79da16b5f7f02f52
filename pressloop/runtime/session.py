"""One claimed run's link to the database: numbered events, checkpoints, lease renewal, finish.

All writes for the run go through one writer task, so they are ordered and batched: events and
checkpoints queued while a write is in flight are committed together with the next one (group
commit; only the newest checkpoint is written), and every write renews the lease and checks the
fencing token in the same statement that stores the checkpoint. A worker that
lost its lease finds out at its next write and stops; it can never commit for a run another
worker took over.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from pressloop.contracts import Checkpoint, Event, EventType
from pressloop.runtime.bus import EventBus
from pressloop.runtime.clock import Now
from pressloop.store import events as event_store
from pressloop.store import runs as run_store
from pressloop.store.db import Database
from pressloop.store.records import Claim

log = logging.getLogger(__name__)

Operation = Callable[[AsyncConnection], Awaitable[None]]


class RunSession:
    def __init__(
        self,
        *,
        database: Database,
        claim: Claim,
        bus: EventBus,
        now: Now,
        lease_ttl_s: float,
        lease_renew_s: float,
        last_seq: int,
    ) -> None:
        self.database = database
        self.claim = claim
        self.bus = bus
        self.now = now
        self.lease_ttl_s = lease_ttl_s
        self.lease_renew_s = lease_renew_s
        self.seq = last_seq
        self.cancel_requested = claim.run.cancel_requested
        self.last_checkpoint: Checkpoint | None = None
        self.failure: BaseException | None = None
        self._events: list[Event] = []
        self._operations: list[tuple[Operation, asyncio.Future[None], bool]] = []
        self._checkpoint: dict[str, Any] | None = None
        self._wake = asyncio.Event()
        self._closed = False
        self._writer: asyncio.Task[None] | None = None
        self._renewer: asyncio.Task[None] | None = None

    @property
    def run_id(self) -> str:
        return self.claim.run.id

    def start(self) -> None:
        self._writer = asyncio.create_task(self._write_loop(), name=f"writer:{self.run_id}")
        self._renewer = asyncio.create_task(self._renew_loop(), name=f"renewer:{self.run_id}")

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
        self._wake.set()

    async def write(self, operation: Operation, *, fenced: bool = False) -> None:
        """Commit `operation` (after every event emitted before it) and wait for the commit.

        `fenced`: the operation checks the lease token itself (finishing the run does), so the
        transaction needs no separate fence statement; it must then store the checkpoint too.
        """
        self._raise_if_failed()
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._operations.append((operation, future, fenced))
        self._wake.set()
        await future

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
        self._wake.set()

    async def renew(self) -> None:
        async def nothing(_conn: AsyncConnection) -> None:
            return None

        await self.write(nothing)

    async def close(self) -> None:
        """Flush what is left and stop the writer (after the final write)."""
        self._closed = True
        self._wake.set()
        for task in (self._renewer, self._writer):
            if task is None:
                continue
            if task is self._renewer:
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _raise_if_failed(self) -> None:
        if self.failure is not None:
            raise self.failure

    async def _renew_loop(self) -> None:
        while True:
            await asyncio.sleep(self.lease_renew_s)
            try:
                await self.renew()
            except Exception:  # the writer recorded the failure; the engine sees it next
                return

    async def _write_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._events or self._operations or self._checkpoint is not None:
                await self._flush()
            if self._closed or self.failure is not None:
                return

    async def _flush(self) -> None:
        events, self._events = self._events, []
        operations, self._operations = self._operations, []
        checkpoint, self._checkpoint = self._checkpoint, None
        try:
            async with self.database.write() as conn:
                if not any(fenced for _op, _future, fenced in operations):
                    self.cancel_requested = await run_store.fence(
                        conn,
                        self.claim,
                        now=self.now(),
                        ttl_s=self.lease_ttl_s,
                        checkpoint=checkpoint,
                        event_seq=events[-1].seq if events else None,
                    )
                await event_store.append_events(conn, events)
                for operation, _future, _fenced in operations:
                    await operation(conn)
        except Exception as exc:
            self.failure = exc
            log.warning("run %s: write failed: %s", self.run_id, exc)
            for _operation, future, _fenced in operations:
                if not future.done():
                    future.set_exception(exc)
            self._events.clear()
            for _operation, future, _fenced in self._operations:
                if not future.done():
                    future.set_exception(exc)
            self._operations.clear()
            return
        for _operation, future, _fenced in operations:
            if not future.done():
                future.set_result(None)
        if events:
            self.bus.notify(self.run_id)

"""What the API, the CLI and the UI read through the Service: threads, runs, events (live),
ledgers, tokens, usage. Nothing here changes a run; `Service` adds the commands.

Split from `service.py` so each file keeps one job; `Service` inherits these and provides the
attributes they use.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import timedelta
from typing import Any

from pressloop.clock import Now
from pressloop.config import Settings
from pressloop.contracts import FINAL_RUN_STATUSES, Event, EventType, RunStatus, Trigger
from pressloop.errors import NotFound
from pressloop.runtime.bus import EventBus, Part, Subscription
from pressloop.runtime.runner import Runner
from pressloop.runtime.site_policies import caller_request
from pressloop.runtime.stream_position import StreamPosition
from pressloop.store import events as event_store
from pressloop.store import ledger as ledger_store
from pressloop.store import runs as run_store
from pressloop.store import threads as thread_store
from pressloop.store import tokens as token_store
from pressloop.store import usage as usage_store
from pressloop.store.db import Database, ping
from pressloop.store.ledger import LedgerEntry
from pressloop.store.records import RunRecord, ThreadRecord, TokenRecord

logger = logging.getLogger(__name__)

# A run rests when it is final or parked for an approval: waiters and streams stop there.
RESTING = FINAL_RUN_STATUSES | {RunStatus.WAITING_APPROVAL}

# A reader of a run running in this process reads the database this many times less often.
LOCAL_POLL_FACTOR = 25
# A stream reads stored events this many at a time.
EVENT_PAGE = 1000


class ServiceReads:
    settings: Settings
    database: Database
    bus: EventBus
    runner: Runner
    now: Now

    async def thread(self, thread_id: str) -> ThreadRecord:
        async with self.database.read() as conn:
            thread = await thread_store.get_thread(conn, thread_id)
        if thread is None:
            raise NotFound(f"thread {thread_id!r} does not exist")
        return thread

    async def thread_detail(self, thread_id: str) -> dict[str, Any]:
        thread = await self.thread(thread_id)
        async with self.database.read() as conn:
            messages = await thread_store.list_messages(conn, thread_id)
            runs = await run_store.list_runs(conn, thread_id=thread_id, limit=200)
            children = await thread_store.list_threads(conn, parent_id=thread_id)
        return {"thread": thread, "messages": messages, "runs": runs, "children": children}

    async def list_threads(self, limit: int = 50) -> list[ThreadRecord]:
        async with self.database.read() as conn:
            return await thread_store.list_threads(conn, limit=limit)

    async def ledger(self, run_id: str) -> list[LedgerEntry]:
        """The run's write and destructive steps: intent, outcome, snapshot, undo state."""
        await self.get_run(run_id)
        async with self.database.read() as conn:
            return await ledger_store.list_entries(conn, run_id)

    async def get_run(self, run_id: str) -> RunRecord:
        async with self.database.read() as conn:
            run = await run_store.get_run(conn, run_id)
        if run is None:
            raise NotFound(f"run {run_id!r} does not exist")
        return run

    async def caller_policy(
        self, thread_id: str, caller: Trigger, request: Mapping[str, Any] | None
    ) -> dict[str, Any] | None:
        """The request policy layer for a run that `caller` asks for under another trigger: no
        looser than `caller`'s own policy on the thread (`site_policies.caller_request`)."""
        async with self.database.read() as conn:
            return await caller_request(conn, thread_id, caller, request)

    async def list_runs(
        self, *, thread_id: str | None = None, status: RunStatus | None = None, limit: int = 50
    ) -> list[RunRecord]:
        async with self.database.read() as conn:
            return await run_store.list_runs(conn, thread_id=thread_id, status=status, limit=limit)

    async def wait(self, run_id: str, timeout_s: float | None = None) -> RunRecord:
        """Wait until the run rests (finished, or waiting for an approval)."""
        deadline = asyncio.get_running_loop().time() + (timeout_s or self.settings.wait_timeout_s)
        subscription = self.bus.subscribe(run_id)
        try:
            run = await self.get_run(run_id)
            while True:
                left = deadline - asyncio.get_running_loop().time()
                if run.status in RESTING or left <= 0:
                    return run
                if await subscription.wait(min(left, self.settings.event_poll_s * 5)):
                    # A run comes to rest in the transaction that commits its run.finished:
                    # other events change nothing a waiter looks at.
                    taken = subscription.take()
                    if not any(e.type is EventType.RUN_FINISHED for e in taken):
                        continue
                run = await self.get_run(run_id)
        finally:
            self.bus.unsubscribe(run_id, subscription)

    async def events(self, run_id: str, *, after: int = 0, limit: int = 1000) -> list[Event]:
        await self.get_run(run_id)
        async with self.database.read() as conn:
            return await event_store.list_events(conn, run_id, after_seq=after, limit=limit)

    async def follow(
        self,
        run_id: str,
        *,
        after: int = 0,
        parts: int = 0,
        subscription: Subscription | None = None,
        send_now: Callable[[Event], bool] | None = None,
    ) -> AsyncIterator[Event]:
        """Every event after `after` (and after `parts` text delta parts beyond it: a stream
        position `after.parts`), live, until the run rests; each exactly once, in order.

        What this process commits is taken straight from the bus; the database is read to catch
        up (at the start, after a gap or a bare wake-up, on every poll tick), so a stream served
        by any process, for a run running in any process, gets the same events. A run running
        here also streams its text deltas before their commit (`runtime/bus.py`): each goes out
        as an event of the delta event it joins (its seq) with data `{"delta", "after": N,
        "part": k}`, the stream's position `N.k`; the committed event then brings only the text
        of parts not sent (usually none).

        `subscription`: one made before the run's first event (`submit(follow=True)`): nothing
        is stored that it will not bring, so the stream starts without reading the database
        (it reads on a gap or a bare wake-up, as always). The stream owns it from here.

        `send_now`: sends a part at once, from the task that publishes it (the turn's), when this
        reader waits with nothing held; True when it went out, False to leave it to the reader
        (`runtime/stream_position.py`). What it sends is not yielded.
        """
        if subscription is not None and (after or parts):
            raise ValueError("a subscription from the run's start streams it from its start")
        position = StreamPosition.start(after, parts)
        read_database = subscription is None
        if subscription is None:
            subscription = self.bus.subscribe(run_id, parts=True)
        if send_now is not None:
            subscription.direct = _direct_sender(position, send_now)
        try:
            while True:
                held = [e for e in subscription.take() if e.seq > position.seen]
                position.took(*subscription.take_parts())
                if read_database or (held and held[0].seq != position.seen + 1):
                    batch = await self._stored_events(run_id, after=position.seen)
                else:
                    batch = held
                for event in batch:
                    rest = position.past(event)
                    if rest is not None:
                        yield rest
                if batch and batch[-1].type is EventType.RUN_FINISHED:
                    return
                for part in position.sendable():
                    yield part
                if read_database and len(batch) >= EVENT_PAGE:
                    continue  # more is stored than one page: read on before waiting
                if read_database and not batch:
                    run = await self.get_run(run_id)
                    if run.status in RESTING and not await self._stored_events(
                        run_id, after=position.seen
                    ):
                        return
                position.waiting = True
                try:
                    read_database = not await subscription.wait(self._poll_s(run_id))
                finally:
                    position.waiting = False
        finally:
            subscription.direct = None
            self.bus.unsubscribe(run_id, subscription)

    def _poll_s(self, run_id: str) -> float:
        """How long a reader waits for the bus before it reads the database again.

        A run this process is running commits every event through this process's bus, and the
        runner wakes its readers when it lets the run go: the database poll is only a safety net
        then. A run queued, or running in another process, is polled for.
        """
        if self.runner.runs_here(run_id):
            return self.settings.event_poll_s * LOCAL_POLL_FACTOR
        return self.settings.event_poll_s

    async def _stored_events(self, run_id: str, *, after: int) -> list[Event]:
        async with self.database.read() as conn:
            return await event_store.list_events(conn, run_id, after_seq=after, limit=EVENT_PAGE)

    async def authenticate(self, token: str) -> TokenRecord | None:
        """The live (not revoked) token record for this plaintext token, if any."""
        async with self.database.read() as conn:
            return await token_store.verify_token(conn, token)

    async def list_tokens(self) -> list[TokenRecord]:
        async with self.database.read() as conn:
            return await token_store.list_tokens(conn)

    async def usage(self, *, days: int = 30, scope: str | None = None) -> list[dict[str, Any]]:
        """Daily usage rows of the last `days` days (today included), oldest first, as stored:
        the turns of this process since its last flush are not in them (`Service.flush_usage`).
        """
        since = (self.now().date() - timedelta(days=max(1, days) - 1)).isoformat()
        async with self.database.read() as conn:
            return await usage_store.list_usage(conn, since_day=since, scope=scope)

    async def check_database(self) -> None:
        """Raise if the database cannot answer a trivial query (health checks)."""
        async with self.database.read() as conn:
            await ping(conn)


def _direct_sender(
    position: StreamPosition, send_now: Callable[[Event], bool]
) -> Callable[[Part], bool]:
    """The subscription's `direct`: a part the reader may not need to wake for."""

    def send(part: Part) -> bool:
        if not position.may_send_now(part):
            return False
        try:
            sent = send_now(position.as_sent(part))
        except Exception:
            # Never the turn's failure: the reader sends the part, and meets the error itself.
            logger.exception("a stream's part could not be sent from the turn's task")
            return False
        if sent:
            position.mark_sent(part)
        return sent

    return send

"""A worker: claims queued runs and runs up to `concurrency` of them at once (asyncio tasks).

Many workers (in one process or many, on many machines) can share one PostgreSQL: claims use
`FOR UPDATE SKIP LOCKED`, and the partial unique index keeps one running run per thread. A
worker looks for runs every `poll_s`, at once when its process queues one or one of its runs
ends, and, on PostgreSQL, when another process leaves a run claimable (`notice_claimable`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from pressloop.clock import Sleep, real_sleep
from pressloop.runtime.observed import count_reclaimed
from pressloop.runtime.runner import Runner
from pressloop.store import approvals as approval_store
from pressloop.store import claims as claim_store

log = logging.getLogger(__name__)

# How many runs one claim transaction takes at most. Large, so that hundreds of runs due at
# once start after a few claims (each also reads its runs' contexts, `runtime/context.py`),
# yet the first of them start before the last are claimed: 500 runs due together started
# within 0.4 s with 200, 0.8-1.0 s with 50.
CLAIM_BATCH = 200

# Woken for something due, a worker looks a little after it: a lease counts as expired only
# strictly after its expiry (`store/claims.py`).
DUE_MARGIN_S = 0.005


class Worker:
    def __init__(
        self,
        runner: Runner,
        *,
        concurrency: int,
        poll_s: float,
        idle_poll_s: float | None = None,
        notified: Callable[[], bool] = lambda: False,
        grace_s: float = 10.0,
        sleep: Sleep = real_sleep,
    ) -> None:
        self.runner = runner
        self.concurrency = concurrency
        self.poll_s = poll_s
        # While `notified()` (PostgreSQL's notifications reach this process), an idle worker
        # waits for them, or for what they do not announce, at most `idle_poll_s`.
        self.idle_poll_s = max(poll_s, idle_poll_s if idle_poll_s is not None else poll_s)
        self.notified = notified
        self.grace_s = grace_s
        self.sleep = sleep
        self._running: set[asyncio.Task[Any]] = set()
        self._stopping = asyncio.Event()
        self._wake = asyncio.Event()
        # Whether the next tick was asked for by something else than a run of ours finishing
        # (a run queued, the poll), and when the last maintenance ran (the runner's clock).
        self._asked = True
        self._maintained_at: float | None = None

    def wake(self) -> None:
        """Look for work now instead of at the next poll (a run was just queued)."""
        self._asked = True
        self._wake.set()

    def notice_claimable(self) -> None:
        """Another process left a run claimable (PostgreSQL's NOTIFY, `store/notify.py`): claim
        now. Only claim: many notifications a second must not each cost a maintenance write,
        which keeps its own pace (`_maintenance_due`)."""
        self._wake.set()

    def _slot_freed(self, task: asyncio.Task[Any]) -> None:
        """A run of ours finished: its slot is free (only now: a tick woken sooner would still
        count it), so claim now, its thread's next run may be queued. Leases and approvals wait
        for their due time (`_maintenance_due`)."""
        self._running.discard(task)
        self._wake.set()

    def _maintenance_due(self) -> bool:
        """Requeue expired leases and expire approvals on every tick asked for, but at most once
        a poll interval while only our own runs' ends wake us: with hundreds of runs ending one
        after the other, each end cost one more write transaction (on SQLite, one more turn of
        the write lock). Leases last tens of seconds, approvals hours: a poll interval late is
        nothing to either."""
        asked, self._asked = self._asked, False
        now = self.runner.monotonic()
        if asked or self._maintained_at is None or now - self._maintained_at >= self.poll_s:
            self._maintained_at = now
            return True
        return False

    async def run_forever(self) -> None:
        while not self._stopping.is_set():
            # Cleared before the tick, not after: a run that ends (or is queued) during the tick
            # wakes the next one, instead of waiting for the poll.
            self._wake.clear()
            try:
                claimed = await self.tick()
                await self.runner.usage.flush_if_due()
            except Exception:  # a database hiccup must not end the worker
                log.exception("worker tick failed")
                claimed = 0
            if claimed == 0:
                try:
                    async with asyncio.timeout(await self._idle_wait_s()):
                        await self._wake.wait()
                except TimeoutError:
                    self._asked = True  # the poll: look at everything

    async def _idle_wait_s(self) -> float:
        """How long an idle worker waits before it looks again, unless woken: `poll_s`; or,
        while notifications reach it (every run made claimable wakes it, `store/notify.py`),
        until the next thing no notification announces (a queued run's backoff ends, a lease
        expires: its worker may be dead; this process's usage counters are due to be written),
        at most `idle_poll_s`. An idle deployment on PostgreSQL then asks the database a few
        times a minute instead of twice a second. A worker running runs keeps `poll_s`: their
        ends wake it anyway, and a look costs it no more than before."""
        if self._running or self.idle_poll_s <= self.poll_s or not self.notified():
            return self.poll_s
        wait = self.idle_poll_s
        try:
            now = self.runner.now()
            async with self.runner.database.read() as conn:
                due = await claim_store.next_due(conn, now=now)
        except Exception:  # a database hiccup: fall back to the poll
            log.exception("worker: reading when the next run is due failed")
            return self.poll_s
        if due is not None:
            wait = min(wait, (due - now).total_seconds() + DUE_MARGIN_S)
        flush_in = self.runner.usage.flush_due_in()
        if flush_in is not None:
            wait = min(wait, flush_in)
        return max(0.0, wait)

    async def tick(self) -> int:
        """Requeue runs whose lease expired (when due: `_maintenance_due`), then claim as many
        runs as there are free slots."""
        if self._maintenance_due():
            async with self.runner.database.write() as conn:
                reclaimed = await claim_store.reclaim_expired_runs(conn, now=self.runner.now())
                await approval_store.expire_due(conn, now=self.runner.now())
            count_reclaimed(self.runner.metrics, reclaimed)
        claimed = 0
        while not self._stopping.is_set():
            free = self.concurrency - len(self._running)
            if free <= 0:
                break
            claims = await self.runner.claimer.claim_many(min(free, CLAIM_BATCH))
            for claim in claims:
                task = asyncio.create_task(self._run(claim), name=f"run:{claim.run.id}")
                self._running.add(task)
                task.add_done_callback(self._slot_freed)
            claimed += len(claims)
            if len(claims) < min(free, CLAIM_BATCH):
                break
        return claimed

    async def _run(self, claim: Any) -> None:
        try:
            await self.runner.run_claim(claim)
        except Exception:
            log.exception("run %s crashed", claim.run.id)

    async def stop(self) -> None:
        """Stop claiming; give running turns `grace_s` (PRESSLOOP_SHUTDOWN_GRACE) to finish,
        then cancel them (handed back to the queue, another worker resumes them from their
        checkpoint)."""
        self._stopping.set()
        self._wake.set()
        if self._running:
            _done, pending = await asyncio.wait(self._running, timeout=self.grace_s)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

"""Heartbeat runs: the scheduler loop that turns due schedules into runs, exactly once per beat.

When a beat is due is `heartbeat_rules.py`; managing schedules is `heartbeat_schedules.py`.

Each due beat creates one run with the idempotency key `schedule:<id>:<due time>` in the same
transaction that moves the schedule to its next due time. Two schedulers (or a restart, or a clock
jump) therefore never make two runs for one beat: PostgreSQL hands each due row to one scheduler
(`SKIP LOCKED`), SQLite serialises them, the guarded UPDATE refuses a beat already handled, and
the unique key refuses a duplicate run. Missed beats collapse into one catch-up run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncConnection

from pressloop.clock import Now
from pressloop.contracts import Trigger
from pressloop.runtime.enqueue import RunRequest, enqueue_run
from pressloop.runtime.heartbeat_rules import in_active_hours, next_due, rule_of
from pressloop.runtime.outcome import HEARTBEAT_OK
from pressloop.store import agents as agent_store
from pressloop.store import runs as run_store
from pressloop.store import schedules as schedule_store
from pressloop.store import threads as thread_store
from pressloop.store.db import Database
from pressloop.store.schedules import ScheduleRecord

log = logging.getLogger(__name__)

DEFAULT_HEARTBEAT = (
    "Heartbeat: look after the site. Check what needs attention and take care of it within your "
    f"policy. If nothing needs attention, answer exactly {HEARTBEAT_OK}."
)


class Scheduler:
    def __init__(
        self,
        *,
        database: Database,
        now: Now,
        max_attempts: int,
        poll_s: float,
        on_run: Callable[[str], None] | None = None,
    ) -> None:
        self.database = database
        self.now = now
        self.max_attempts = max_attempts
        self.poll_s = poll_s
        self.on_run = on_run
        self._stopping = asyncio.Event()

    async def run_forever(self) -> None:
        while not self._stopping.is_set():
            try:
                await self.tick()
            except Exception:  # a database hiccup must not stop the heartbeats for good
                log.exception("scheduler tick failed")
            try:
                async with asyncio.timeout(self.poll_s):
                    await self._stopping.wait()
            except TimeoutError:
                pass

    def stop(self) -> None:
        self._stopping.set()

    async def tick(self) -> list[str]:
        """Handle every due beat; return the ids of the runs created."""
        now = self.now()
        created: list[str] = []
        async with self.database.write() as conn:
            for schedule in await schedule_store.due_schedules(conn, now=now):
                run_id = await self._beat(conn, schedule, now)
                if run_id is not None:
                    created.append(run_id)
        for run_id in created:
            if self.on_run is not None:
                self.on_run(run_id)
        return created

    async def _beat(
        self, conn: AsyncConnection, schedule: ScheduleRecord, now: datetime
    ) -> str | None:
        rule = rule_of(schedule)
        due = schedule.next_due_at
        following = next_due(rule, after=now, anchor=due)
        agent = await agent_store.get_agent(conn, schedule.agent_id)
        thread_id = schedule.thread_id
        if thread_id is None:
            created = await thread_store.create_thread(
                conn,
                agent_id=schedule.agent_id,
                now=now,
                title="Heartbeat",
                created_by=f"schedule:{schedule.id}",
            )
            thread_id = created.id
        # Claim the beat first: if another scheduler already moved this schedule on, stop here.
        if not await schedule_store.advance(
            conn, schedule, next_due_at=following, now=now, run_id=None, thread_id=thread_id
        ):
            return None
        if not in_active_hours(rule, due):
            return None
        if await run_store.pending_run(conn, thread_id, Trigger.HEARTBEAT) is not None:
            return None  # at most one pending beat per thread: the queued one covers this one
        thread = await thread_store.get_thread(conn, thread_id)
        assert thread is not None  # schedules.thread_id references a thread
        message = (
            schedule.message
            or (agent.files.get("HEARTBEAT.md") if agent else None)
            or DEFAULT_HEARTBEAT
        )
        beat = RunRequest(
            trigger=Trigger.HEARTBEAT,
            message=message,
            requesting_user=f"schedule:{schedule.id}",
            idempotency_key=f"schedule:{schedule.id}:{due.isoformat()}",
            agent_id=schedule.agent_id,
        )
        run, inserted = await enqueue_run(
            conn, thread, beat, now=now, max_attempts=self.max_attempts
        )
        if not inserted:
            return None
        await schedule_store.update_schedule(conn, schedule.id, now=now, last_run_id=run.id)
        return run.id

"""Managing heartbeat schedules (what `/v1/schedules` and `pressloop schedules` use)."""

from __future__ import annotations

from typing import Any

from pressloop.clock import Now
from pressloop.errors import NotFound
from pressloop.runtime.heartbeat_rules import (
    BeatRule,
    next_due,
    parse_active_hours,
    rule_of,
    validate,
)
from pressloop.store import agents as agent_store
from pressloop.store import schedules as schedule_store
from pressloop.store import threads as thread_store
from pressloop.store.db import Database
from pressloop.store.schedules import ScheduleRecord


class Schedules:
    def __init__(self, database: Database, now: Now) -> None:
        self.database = database
        self.now = now

    async def create(
        self,
        *,
        kind: str,
        interval_s: int | None = None,
        cron: str | None = None,
        timezone: str = "UTC",
        active_hours: dict[str, str] | None = None,
        message: str | None = None,
        thread_id: str | None = None,
        agent_id: str = agent_store.DEFAULT_AGENT_ID,
        created_by: str | None = None,
    ) -> ScheduleRecord:
        rule = BeatRule(
            kind=kind,
            interval_s=interval_s,
            cron=cron,
            timezone=timezone,
            active_hours=parse_active_hours(active_hours),
        )
        validate(rule)
        now = self.now()
        async with self.database.write() as conn:
            if await agent_store.get_agent(conn, agent_id) is None:
                raise NotFound(f"agent {agent_id!r} does not exist")
            if thread_id is not None and await thread_store.get_thread(conn, thread_id) is None:
                raise NotFound(f"thread {thread_id!r} does not exist")
            return await schedule_store.create_schedule(
                conn,
                now=now,
                next_due_at=next_due(rule, after=now),
                agent_id=agent_id,
                thread_id=thread_id,
                kind=kind,
                interval_s=interval_s,
                cron=cron,
                timezone=timezone,
                active_hours=active_hours,
                message=message,
                status="active",
                created_by=created_by,
            )

    async def list(self) -> list[ScheduleRecord]:
        async with self.database.read() as conn:
            return await schedule_store.list_schedules(conn)

    async def get(self, schedule_id: str) -> ScheduleRecord:
        async with self.database.read() as conn:
            found = await schedule_store.get_schedule(conn, schedule_id)
        if found is None:
            raise NotFound(f"schedule {schedule_id!r} does not exist")
        return found

    async def set_status(self, schedule_id: str, status: str) -> ScheduleRecord:
        """Pause or resume; a resumed schedule is next due after now, not in the past."""
        schedule = await self.get(schedule_id)
        now = self.now()
        changes: dict[str, Any] = {"status": status}
        if status == "active" and schedule.next_due_at < now:
            changes["next_due_at"] = next_due(rule_of(schedule), after=now)
        async with self.database.write() as conn:
            updated = await schedule_store.update_schedule(conn, schedule_id, now=now, **changes)
        assert updated is not None
        return updated

    async def delete(self, schedule_id: str) -> None:
        async with self.database.write() as conn:
            if not await schedule_store.delete_schedule(conn, schedule_id):
                raise NotFound(f"schedule {schedule_id!r} does not exist")

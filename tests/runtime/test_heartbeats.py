"""Heartbeats on both databases: one run per beat, no floods, busy threads, quiet OKs."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from pressloop.contracts import RunStatus, Trigger
from pressloop.runtime.heartbeat_rules import (
    BeatRule,
    in_active_hours,
    next_due,
    parse_active_hours,
)
from pressloop.runtime.heartbeat_runs import Scheduler
from pressloop.runtime.heartbeat_schedules import Schedules
from pressloop.runtime.service import Service
from pressloop.store.db import Database
from pressloop.store.records import RunRecord
from tests.conftest import FakeClock
from tests.runtime.conftest import ServiceFactory


def scheduler_for(service: Service, database: Database | None = None) -> Scheduler:
    return Scheduler(
        database=database or service.database, now=service.now, max_attempts=3, poll_s=0.05
    )


async def heartbeat_runs(service: Service) -> list[RunRecord]:
    return [r for r in await service.list_runs(limit=500) if r.trigger is Trigger.HEARTBEAT]


async def test_a_due_beat_creates_exactly_one_run(
    make_service: ServiceFactory, clock: FakeClock
) -> None:
    service: Service = await make_service([])
    schedules = Schedules(service.database, service.now)
    schedule = await schedules.create(kind="interval", interval_s=60, message="Check comments")
    assert schedule.next_due_at == clock() + timedelta(seconds=60)
    scheduler = scheduler_for(service)
    assert await scheduler.tick() == []

    clock.advance(61)
    created = await scheduler.tick()
    assert len(created) == 1 and await scheduler.tick() == []
    run = await service.get_run(created[0])
    assert run.trigger is Trigger.HEARTBEAT and run.input == "Check comments"
    assert run.idempotency_key == f"schedule:{schedule.id}:{schedule.next_due_at.isoformat()}"
    assert run.policy.max_rounds == 4  # the heartbeat profile
    refreshed = await schedules.get(schedule.id)
    assert refreshed.next_due_at == schedule.next_due_at + timedelta(seconds=60)
    assert refreshed.last_run_id == run.id and refreshed.thread_id == run.thread_id


async def test_racing_schedulers_create_one_run_per_beat(
    make_service: ServiceFactory, clock: FakeClock, database_url: str
) -> None:
    service: Service = await make_service([])
    schedules = Schedules(service.database, service.now)
    for _ in range(20):
        await schedules.create(kind="interval", interval_s=60)
    other_database = Database.open(database_url)
    try:
        racers = [scheduler_for(service), scheduler_for(service, other_database)]
        for _beat in range(3):
            clock.advance(60)
            results = await asyncio.gather(*(r.tick() for r in racers * 2))
            assert sum(len(created) for created in results) == 20
            for run in await heartbeat_runs(service):
                if run.status is RunStatus.QUEUED:  # as if each beat had run
                    await service.cancel(run.id)
        keys = [r.idempotency_key for r in await heartbeat_runs(service)]
        assert len(keys) == 60 and len(set(keys)) == 60
    finally:
        await other_database.close()


async def test_a_restart_after_missed_beats_makes_one_catch_up_run(
    make_service: ServiceFactory, clock: FakeClock
) -> None:
    service: Service = await make_service([])
    schedules = Schedules(service.database, service.now)
    schedule = await schedules.create(kind="interval", interval_s=60)
    clock.advance(60 * 10 + 30)  # ten beats missed while nothing ran
    assert len(await scheduler_for(service).tick()) == 1
    refreshed = await schedules.get(schedule.id)
    # The next beat keeps the phase and lies in the future: no flood of past beats.
    assert refreshed.next_due_at == schedule.next_due_at + timedelta(seconds=600)
    assert refreshed.next_due_at > clock()


async def test_a_busy_thread_keeps_one_pending_beat(
    make_service: ServiceFactory, clock: FakeClock
) -> None:
    service: Service = await make_service([{"text": "HEARTBEAT_OK"}])
    thread = await service.create_thread()
    busy = (await service.submit(thread.id, "a long chat")).run
    assert await service.runner.claimer.claim(busy.id) is not None
    schedules = Schedules(service.database, service.now)
    await schedules.create(kind="interval", interval_s=60, thread_id=thread.id)
    scheduler = scheduler_for(service)
    clock.advance(60)
    assert len(await scheduler.tick()) == 1  # queued behind the chat, not skipped
    clock.advance(60)
    assert await scheduler.tick() == []  # the pending beat covers this one
    runs = await heartbeat_runs(service)
    assert [r.status for r in runs] == [RunStatus.QUEUED]


async def test_heartbeat_ok_ends_quietly(make_service: ServiceFactory, clock: FakeClock) -> None:
    service: Service = await make_service([{"text": "HEARTBEAT_OK"}])
    schedules = Schedules(service.database, service.now)
    schedule = await schedules.create(kind="interval", interval_s=60)
    clock.advance(60)
    (run_id,) = await scheduler_for(service).tick()
    run = await service.run_now(run_id)
    assert run is not None and run.status is RunStatus.SUCCEEDED
    assert run.result is not None and run.result.assistant_text == "HEARTBEAT_OK"
    detail = await service.thread_detail((await schedules.get(schedule.id)).thread_id or "")
    assert detail["messages"] == []


async def test_beats_outside_active_hours_are_skipped(
    make_service: ServiceFactory, clock: FakeClock
) -> None:
    service: Service = await make_service([])
    schedules = Schedules(service.database, service.now)
    # The clock starts at 12:00 UTC, which is 13:00 in Paris (winter): outside 08:00-12:00.
    await schedules.create(
        kind="interval",
        interval_s=3600,
        timezone="Europe/Paris",
        active_hours={"start": "08:00", "end": "12:00"},
    )
    clock.advance(3600)
    assert await scheduler_for(service).tick() == []


async def test_paused_schedules_do_not_beat_and_resume_in_the_future(
    make_service: ServiceFactory, clock: FakeClock
) -> None:
    service: Service = await make_service([])
    schedules = Schedules(service.database, service.now)
    schedule = await schedules.create(kind="interval", interval_s=60)
    await schedules.set_status(schedule.id, "paused")
    clock.advance(300)
    assert await scheduler_for(service).tick() == []
    resumed = await schedules.set_status(schedule.id, "active")
    assert resumed.next_due_at > clock()


def test_cron_beats_follow_the_timezone() -> None:
    rule = BeatRule(kind="cron", cron="0 9 * * *", timezone="America/New_York")
    after = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)  # 07:00 in New York
    assert next_due(rule, after=after) == datetime(2026, 1, 5, 14, 0, tzinfo=UTC)


def test_active_hours_may_wrap_midnight() -> None:
    rule = BeatRule(
        kind="interval",
        interval_s=60,
        active_hours=parse_active_hours({"start": "22:00", "end": "06:00"}),
    )
    assert in_active_hours(rule, datetime(2026, 1, 5, 23, 30, tzinfo=UTC))
    assert in_active_hours(rule, datetime(2026, 1, 5, 5, 59, tzinfo=UTC))
    assert not in_active_hours(rule, datetime(2026, 1, 5, 12, 0, tzinfo=UTC))

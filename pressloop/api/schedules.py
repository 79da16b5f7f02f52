"""Heartbeat schedules: list, create, pause, resume, delete; and spawning child agents."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from fastapi import APIRouter, Response
from pydantic import BaseModel, Field

from pressloop.api.auth import Operator, ServiceDep, Viewer
from pressloop.api.schemas import Request, RunOut, ThreadOut
from pressloop.store.schedules import ScheduleRecord

router = APIRouter(tags=["schedules"])


class ActiveHours(Request):
    start: str = Field(pattern=r"^\d{2}:\d{2}$", examples=["08:00"])
    end: str = Field(pattern=r"^\d{2}:\d{2}$", examples=["22:00"])


class ScheduleCreate(Request):
    kind: Literal["interval", "cron"]
    interval_s: int | None = Field(default=None, ge=1, description="For kind=interval.")
    cron: str | None = Field(default=None, max_length=100, description="For kind=cron.")
    timezone: str = Field(default="UTC", max_length=64)
    active_hours: ActiveHours | None = None
    message: str | None = Field(
        default=None, max_length=8000, description="The beat's prompt (else HEARTBEAT.md)."
    )
    thread_id: str | None = Field(
        default=None, description="Beat into this thread (else a thread of its own)."
    )


class ScheduleOut(BaseModel):
    id: str
    agent_id: str
    thread_id: str | None
    kind: str
    interval_s: int | None
    cron: str | None
    timezone: str
    active_hours: dict[str, str] | None
    message: str | None
    status: str
    next_due_at: datetime
    last_due_at: datetime | None
    last_run_id: str | None
    created_by: str | None
    created_at: datetime

    @classmethod
    def of(cls, schedule: ScheduleRecord) -> ScheduleOut:
        return cls.model_validate(schedule.public())


class SpawnCreate(Request):
    message: str = Field(description="The child agent's task.")
    wait: bool = Field(default=False, description="Wake this thread with the child's result.")
    title: str = Field(default="", max_length=200)
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=200)


class Spawned(BaseModel):
    thread: ThreadOut
    run: RunOut


@router.get("/v1/schedules")
async def list_schedules(service: ServiceDep, _who: Viewer) -> list[ScheduleOut]:
    return [ScheduleOut.of(s) for s in await service.schedules.list()]


@router.post("/v1/schedules", status_code=201)
async def create_schedule(body: ScheduleCreate, service: ServiceDep, who: Operator) -> ScheduleOut:
    schedule = await service.schedules.create(
        kind=body.kind,
        interval_s=body.interval_s,
        cron=body.cron,
        timezone=body.timezone,
        active_hours=body.active_hours.model_dump() if body.active_hours else None,
        message=body.message,
        thread_id=body.thread_id,
        created_by=who.name,
    )
    return ScheduleOut.of(schedule)


@router.post("/v1/schedules/{schedule_id}/pause")
async def pause_schedule(schedule_id: str, service: ServiceDep, _who: Operator) -> ScheduleOut:
    return ScheduleOut.of(await service.schedules.set_status(schedule_id, "paused"))


@router.post("/v1/schedules/{schedule_id}/resume")
async def resume_schedule(schedule_id: str, service: ServiceDep, _who: Operator) -> ScheduleOut:
    return ScheduleOut.of(await service.schedules.set_status(schedule_id, "active"))


@router.delete("/v1/schedules/{schedule_id}", status_code=204)
async def delete_schedule(schedule_id: str, service: ServiceDep, _who: Operator) -> Response:
    await service.schedules.delete(schedule_id)
    return Response(status_code=204)


@router.post("/v1/threads/{thread_id}/spawn", status_code=201)
async def spawn(thread_id: str, body: SpawnCreate, service: ServiceDep, who: Operator) -> Spawned:
    """Start a child agent (spawned policy: no destructive actions) on a new child thread."""
    spawned = await service.spawn(
        thread_id,
        body.message,
        wait=body.wait,
        user=who.name,
        idempotency_key=body.idempotency_key,
        title=body.title,
    )
    return Spawned(thread=ThreadOut.of(spawned.thread), run=RunOut.of(spawned.run))

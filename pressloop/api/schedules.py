"""Heartbeat schedules: list, create, pause, resume, delete; and spawning child agents."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from croniter import CroniterError, croniter
from fastapi import APIRouter, Response
from pydantic import BaseModel, Field, StrictBool

from pressloop.api.auth import Operator, ServiceDep, Viewer
from pressloop.api.bounds import ID_MAX_LENGTH, ID_PATTERN, Id
from pressloop.api.errors import error_responses
from pressloop.api.schemas import NotBlank, RecordOut, Request, RunOut, ThreadOut
from pressloop.errors import InvalidRequest

router = APIRouter(tags=["schedules"])

# The longest interval between beats: a year (a rarer beat is a cron rule's job).
MAX_INTERVAL_S = 366 * 86400
CLOCK_TIME = r"^([01][0-9]|2[0-3]):[0-5][0-9]$"
# The idempotency key of a spawn is stored with its parent thread's id before it.
SPAWN_KEY_MAX_LENGTH = 150


class ActiveHours(Request):
    start: str = Field(pattern=CLOCK_TIME, examples=["08:00"])
    end: str = Field(pattern=CLOCK_TIME, examples=["22:00"])


class ScheduleCreate(Request):
    kind: Literal["interval", "cron"]
    interval_s: int | None = Field(
        default=None, ge=1, le=MAX_INTERVAL_S, description="For kind=interval: seconds."
    )
    cron: str | None = Field(
        default=None,
        max_length=100,
        description="For kind=cron: a rule that comes due (not 31 February).",
        examples=["0 9 * * 1-5"],
    )
    timezone: str = Field(
        default="UTC", max_length=64, description="An IANA zone.", examples=["Europe/Paris"]
    )
    active_hours: ActiveHours | None = None
    message: str | None = Field(
        default=None, max_length=8000, description="The beat's prompt (else HEARTBEAT.md)."
    )
    thread_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=ID_MAX_LENGTH,
        pattern=ID_PATTERN,
        description="Beat into this thread (else a thread of its own).",
    )

    def check_cron(self) -> None:
        """A valid cron rule may still never come due (`0 0 31 2 *`): refused now, not when
        the scheduler computes its next beat."""
        if self.kind != "cron" or not self.cron or not croniter.is_valid(self.cron):
            return  # the schedules service says what is wrong
        try:
            croniter(self.cron, datetime.now(UTC)).get_next(datetime)
        except (CroniterError, ValueError, OverflowError):
            raise InvalidRequest(f"the cron rule {self.cron!r} never comes due") from None


class ScheduleOut(RecordOut):
    id: str
    agent_id: str
    thread_id: str | None
    kind: Literal["interval", "cron"]
    interval_s: int | None
    cron: str | None
    timezone: str
    active_hours: dict[str, str] | None
    message: str | None
    status: Literal["active", "paused"]
    next_due_at: datetime
    last_due_at: datetime | None
    last_run_id: str | None
    created_by: str | None
    created_at: datetime


class SpawnCreate(Request):
    message: NotBlank = Field(description="The child agent's task.")
    wait: StrictBool = Field(default=False, description="Wake this thread with the child's result.")
    title: str = Field(default="", max_length=200)
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=SPAWN_KEY_MAX_LENGTH)


class Spawned(BaseModel):
    thread: ThreadOut
    run: RunOut


@router.get("/v1/schedules")
async def list_schedules(service: ServiceDep, _who: Viewer) -> list[ScheduleOut]:
    return [ScheduleOut.of(s) for s in await service.schedules.list()]


@router.post("/v1/schedules", status_code=201, responses=error_responses(404))
async def create_schedule(body: ScheduleCreate, service: ServiceDep, who: Operator) -> ScheduleOut:
    """A heartbeat: the agent runs on this interval or cron rule, within the active hours."""
    body.check_cron()
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
async def pause_schedule(schedule_id: Id, service: ServiceDep, _who: Operator) -> ScheduleOut:
    return ScheduleOut.of(await service.schedules.set_status(schedule_id, "paused"))


@router.post("/v1/schedules/{schedule_id}/resume")
async def resume_schedule(schedule_id: Id, service: ServiceDep, _who: Operator) -> ScheduleOut:
    return ScheduleOut.of(await service.schedules.set_status(schedule_id, "active"))


@router.delete("/v1/schedules/{schedule_id}", status_code=204)
async def delete_schedule(schedule_id: Id, service: ServiceDep, _who: Operator) -> Response:
    await service.schedules.delete(schedule_id)
    return Response(status_code=204)


@router.post("/v1/threads/{thread_id}/spawn", status_code=201, responses=error_responses(409, 503))
async def spawn(thread_id: Id, body: SpawnCreate, service: ServiceDep, who: Operator) -> Spawned:
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

"""`pressloop schedules ...`: heartbeat schedules from the terminal."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from pressloop.cli_common import console, local_user, opened, run_command
from pressloop.cli_render import when
from pressloop.store.schedules import ScheduleRecord

schedules_app = typer.Typer(no_args_is_help=True, help="Heartbeat schedules.")


def schedules_table(schedules: list[ScheduleRecord]) -> Table:
    table = Table("id", "rule", "timezone", "hours", "status", "next due", "last run", "thread")
    for s in schedules:
        rule = f"every {s.interval_s} s" if s.kind == "interval" else f"cron {s.cron}"
        hours = f"{s.active_hours['start']}-{s.active_hours['end']}" if s.active_hours else "all"
        table.add_row(
            s.id,
            escape(rule),
            s.timezone,
            hours,
            s.status,
            when(s.next_due_at),
            s.last_run_id or "",
            s.thread_id or "",
        )
    return table


@schedules_app.command("list")
def schedules_list() -> None:
    """Every schedule with its next due time."""

    async def show() -> int:
        async with opened() as service:
            console.print(schedules_table(await service.schedules.list()))
        return 0

    run_command(show())


@schedules_app.command("create")
def schedules_create(
    every: Annotated[int | None, typer.Option(help="Beat every N seconds.")] = None,
    cron: Annotated[str | None, typer.Option(help='A cron expression, e.g. "0 9 * * *".')] = None,
    timezone: Annotated[str, typer.Option(help="IANA timezone of cron and hours.")] = "UTC",
    hours: Annotated[str | None, typer.Option(help='Active hours, e.g. "08:00-22:00".')] = None,
    message: Annotated[str | None, typer.Option(help="The beat's prompt.")] = None,
    thread: Annotated[str | None, typer.Option("--thread", help="Beat into this thread.")] = None,
) -> None:
    """Create a heartbeat: --every N or --cron EXPR."""
    if (every is None) == (cron is None):
        raise typer.BadParameter("give exactly one of --every or --cron")
    active = None
    if hours:
        start, _, end = hours.partition("-")
        active = {"start": start.strip(), "end": end.strip()}

    async def create() -> int:
        async with opened() as service:
            schedule = await service.schedules.create(
                kind="interval" if every is not None else "cron",
                interval_s=every,
                cron=cron,
                timezone=timezone,
                active_hours=active,
                message=message,
                thread_id=thread,
                created_by=local_user(),
            )
        console.print(schedules_table([schedule]))
        return 0

    run_command(create())


def _set_status(schedule_id: str, status: str) -> None:
    async def change() -> int:
        async with opened() as service:
            schedule = await service.schedules.set_status(schedule_id, status)
        console.print(schedules_table([schedule]))
        return 0

    run_command(change())


@schedules_app.command("pause")
def schedules_pause(schedule_id: str) -> None:
    """Stop a schedule's beats until it is resumed."""
    _set_status(schedule_id, "paused")


@schedules_app.command("resume")
def schedules_resume(schedule_id: str) -> None:
    """Resume a paused schedule (its next beat is after now)."""
    _set_status(schedule_id, "active")


@schedules_app.command("delete")
def schedules_delete(schedule_id: str) -> None:
    """Delete a schedule (its thread and runs stay)."""

    async def delete() -> int:
        async with opened() as service:
            await service.schedules.delete(schedule_id)
        console.print(f"schedule {schedule_id} deleted")
        return 0

    run_command(delete())

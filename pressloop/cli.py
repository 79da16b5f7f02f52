"""The `pressloop` command (DESIGN.md section 10).

Every command reads `Settings()` (the environment and a `.env` file) and runs in one
`asyncio.run`. Exit codes: 0 done, 1 failed (a failed run, a failed check), 2 a usage error.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from pressloop.cli_approvals import approvals_app
from pressloop.cli_common import (
    console,
    errors,
    load_settings,
    local_user,
    opened,
    run_command,
)
from pressloop.cli_mcp_servers import mcp_servers_app
from pressloop.cli_render import (
    EventPrinter,
    events_table,
    run_detail,
    runs_table,
    status_text,
    threads_table,
)
from pressloop.cli_schedules import schedules_app
from pressloop.cli_tokens import token_app
from pressloop.contracts import RunStatus, Trigger
from pressloop.runtime.notices import PRESSLOOP
from pressloop.store.records import RunRecord

if TYPE_CHECKING:  # the runtime (SQLAlchemy, Alembic) is imported when a command needs it
    from pressloop.runtime.service import Service

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="Pressloop: run AI agents for WordPress sites.",
)
threads_app = typer.Typer(no_args_is_help=True, help="List and show threads.")
runs_app = typer.Typer(no_args_is_help=True, help="List, inspect and control runs.")
db_app = typer.Typer(no_args_is_help=True, help="The database.")
app.add_typer(threads_app, name="threads")
app.add_typer(runs_app, name="runs")
app.add_typer(token_app, name="token")
app.add_typer(db_app, name="db")
app.add_typer(schedules_app, name="schedules")
app.add_typer(approvals_app, name="approvals")
app.add_typer(mcp_servers_app, name="mcp-servers")


FAILED = {RunStatus.FAILED, RunStatus.TIMED_OUT, RunStatus.CANCELLED, RunStatus.DEAD}


def main() -> None:
    app()


# serve and worker ------------------------------------------------------------------------------


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Address to listen on.")] = None,
    port: Annotated[int | None, typer.Option(help="Port to listen on.")] = None,
    local_wordpress: Annotated[
        bool,
        typer.Option(help="With no PRESSLOOP_WP_URL, start a local WordPress to act on."),
    ] = True,
    processes: Annotated[
        int | None,
        typer.Option(
            min=1, max=64, help="Serving processes on the port (PRESSLOOP_SERVE_PROCESSES)."
        ),
    ] = None,
    fd: Annotated[
        int | None,
        typer.Option(
            hidden=True,
            help="Serve on this inherited listening socket (a process the first one started).",
        ),
    ] = None,
) -> None:
    """Serve the HTTP API with an in-process worker and scheduler."""
    from pressloop.cli_serve import serve_api, serving_loop

    # Read once, inside run_command (an invalid configuration is its red line): first for the
    # loop to make, then for the service on it.
    settings_once = functools.cache(load_settings)

    async def start() -> int:
        settings = settings_once()
        if processes is not None:
            settings = settings.model_copy(update={"serve_processes": processes})
        return await serve_api(
            console, settings, host=host, port=port, wordpress=local_wordpress, fd=fd
        )

    run_command(start(), loop_factory=lambda: serving_loop(settings_once()))


@app.command()
def worker(
    concurrency: Annotated[int | None, typer.Option(help="Runs at once.")] = None,
    scheduler: Annotated[bool, typer.Option(help="Also run the heartbeat scheduler.")] = False,
) -> None:
    """Run a worker process (run many against one PostgreSQL)."""
    from pressloop.runtime.process import run_worker

    async def work() -> int:
        await run_worker(load_settings(), concurrency=concurrency, scheduler=scheduler)
        return 0

    run_command(work())


class McpRole(StrEnum):
    OPERATOR = "operator"
    ADMIN = "admin"


@app.command()
def mcp(
    role: Annotated[
        McpRole,
        typer.Option(help="What the agent may do: operator (chat, act), admin (also approve)."),
    ] = McpRole.OPERATOR,
) -> None:
    """Serve MCP over stdio for a desktop or IDE agent, acting as the local user."""
    from pressloop.mcp_server.caller import Caller
    from pressloop.mcp_server.stdio import serve_stdio

    async def start() -> int:
        caller = Caller(name=local_user(), role=role.value)
        return await serve_stdio(load_settings(), caller)

    run_command(start())


# chat ------------------------------------------------------------------------------------------


@app.command()
def chat(
    message: Annotated[str, typer.Argument(help="What to say to the agent.")],
    thread: Annotated[str | None, typer.Option("--thread", "-t", help="Continue a thread.")] = None,
) -> None:
    """One chat turn from the terminal, in this process, streaming what the agent does."""
    run_command(_chat(message, thread))


async def _chat(message: str, thread_id: str | None) -> int:
    async with opened() as service:
        user = local_user()
        await service.check_enabled()  # the kill switch: refused before a thread is made
        if thread_id is None:
            thread_id = (await service.create_thread(title=message[:80], created_by=user)).id
        submission = await service.submit(
            thread_id, message, trigger=Trigger.CHAT, user=user, start_here=True
        )
        run_id = submission.run.id
        printer = EventPrinter(console)

        async def show_live() -> None:
            async for event in service.follow(run_id):
                printer.show(event)

        follower = asyncio.create_task(show_live())
        try:
            if submission.started is not None:
                await submission.started
        except asyncio.CancelledError:  # Ctrl-C: the run is handed back; cancel it for good
            await service.cancel(run_id)
            errors.print(f"[yellow]run {run_id} cancelled[/]")
            raise
        finally:
            follower.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await follower
        for event in await service.events(run_id, after=printer.last_seq):
            printer.show(event)
        run = await _not_left_retrying(service, await service.get_run(run_id), printer)
        printer.summary(run)
        if run.status is RunStatus.QUEUED:
            errors.print(
                f"[yellow]run {run.id} is queued (the thread is busy, or it waits for a retry); "
                "a worker (`pressloop serve` or `pressloop worker`) will run it[/]",
                soft_wrap=True,
            )
        console.print(
            f"thread {thread_id} (continue with: pressloop chat --thread {thread_id} ...)",
            soft_wrap=True,
            highlight=False,
        )
        return 1 if run.status in FAILED or run.status is RunStatus.QUEUED else 0


async def _not_left_retrying(service: Service, run: RunRecord, printer: EventPrinter) -> RunRecord:
    """A turn that failed and waits for a retry is cancelled: a person at a terminal is not
    left with a run retrying behind them. Pressloop's notice (stored in the thread) says so."""
    if run.status is not RunStatus.QUEUED or run.error is None:
        return run
    cancelled = await service.cancel(run.id)
    messages = (await service.thread_detail(run.thread_id))["messages"]
    if messages and messages[-1].name == PRESSLOOP:
        printer.notice(messages[-1].content)
    return cancelled


# threads and runs ------------------------------------------------------------------------------


@threads_app.command("list")
def threads_list(limit: Annotated[int, typer.Option(help="At most this many.")] = 50) -> None:
    """The most recently active threads."""

    async def show() -> int:
        async with opened() as service:
            console.print(threads_table(await service.list_threads(limit=limit)))
        return 0

    run_command(show())


@threads_app.command("show")
def threads_show(thread_id: str) -> None:
    """A thread's transcript and runs."""

    async def show() -> int:
        async with opened() as service:
            detail = await service.thread_detail(thread_id)
        thread = detail["thread"]
        console.print(f"[bold]thread[/] {thread.id}  {escape(thread.title)}", soft_wrap=True)
        for message in detail["messages"]:
            calls = " ".join(f"→ {c.name}" for c in message.tool_calls)
            text = f"{message.content} {calls}".strip()
            who = PRESSLOOP if message.name == PRESSLOOP else message.role.value
            console.print(f"[bold]{who:>9}[/] {escape(text)}", soft_wrap=True)
        console.print(runs_table(detail["runs"]))
        if detail["children"]:
            console.print(threads_table(detail["children"]))
        return 0

    run_command(show())


@runs_app.command("list")
def runs_list(
    thread: Annotated[str | None, typer.Option("--thread", help="Only this thread's runs.")] = None,
    status: Annotated[RunStatus | None, typer.Option(help="Only runs in this state.")] = None,
    limit: Annotated[int, typer.Option(help="At most this many.")] = 50,
) -> None:
    """The newest runs."""

    async def show() -> int:
        async with opened() as service:
            runs = await service.list_runs(thread_id=thread, status=status, limit=limit)
        console.print(runs_table(runs))
        return 0

    run_command(show())


@runs_app.command("show")
def runs_show(run_id: str) -> None:
    """One run: its state, steps, answer and error."""

    async def show() -> int:
        async with opened() as service:
            run_detail(console, await service.get_run(run_id))
        return 0

    run_command(show())


@runs_app.command("events")
def runs_events(
    run_id: str, after: Annotated[int, typer.Option(help="Only events after this seq.")] = 0
) -> None:
    """A run's stored events."""

    async def show() -> int:
        async with opened() as service:
            console.print(events_table(await service.events(run_id, after=after)))
        return 0

    run_command(show())


@runs_app.command("cancel")
def runs_cancel(run_id: str) -> None:
    """Cancel a run: a queued or paused one at once, a running one within a second."""
    run_command(_control(run_id, "cancel"))


@runs_app.command("requeue")
def runs_requeue(run_id: str) -> None:
    """Give a dead, failed or timed-out run a fresh set of attempts."""
    run_command(_control(run_id, "requeue"))


async def _control(run_id: str, verb: str) -> int:
    async with opened() as service:
        run = await (service.cancel(run_id) if verb == "cancel" else service.requeue(run_id))
    line = status_text(run.status)
    if verb == "cancel" and run.status is RunStatus.RUNNING:
        line.append(" (stopping: asked to cancel, not stopped yet)")
    console.print(f"run {run.id}: ", line, soft_wrap=True)
    return 0


# database, doctor (tokens: cli_tokens.py) -------------------------------------------------------


@db_app.command("upgrade")
def db_upgrade() -> None:
    """Bring the database to the newest schema."""
    from pressloop.store import migrate
    from pressloop.store.db import Database

    async def upgrade() -> int:
        database = Database.open(load_settings().resolved_database_url())
        try:
            await migrate.upgrade(database)
            revision = await migrate.current_revision(database)
        finally:
            await database.close()
        console.print(f"database at revision {revision} (head)")
        return 0

    run_command(upgrade())


@app.command()
def doctor() -> None:
    """Check the configuration, the database, the model provider and the kill switch."""
    from pressloop.cli_doctor import run_checks

    run_command(run_checks(console))


if __name__ == "__main__":
    main()

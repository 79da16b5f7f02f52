"""What every `pressloop` command shares: the consoles, settings, running a command, the
service. Errors are shown as one red line, never as a traceback."""

from __future__ import annotations

import asyncio
import contextlib
import getpass
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

import typer
import uvloop
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape

from pressloop.config import Settings
from pressloop.errors import (
    ConfigurationError,
    Conflict,
    InvalidRequest,
    NotFound,
    PressloopError,
)

T = TypeVar("T")

if TYPE_CHECKING:  # the runtime (SQLAlchemy, Alembic) is imported when a command needs it
    from pressloop.runtime.service import Service

USAGE_ERRORS = (NotFound, InvalidRequest, Conflict)


def _console(*, stderr: bool = False) -> Console:
    """A terminal's own width; piped or redirected output is not wrapped at 80 columns."""
    console = Console(stderr=stderr)
    return console if console.is_terminal else Console(stderr=stderr, width=200)


console = _console()
errors = _console(stderr=True)


def load_settings() -> Settings:
    try:
        return Settings()
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        raise ConfigurationError(f"the configuration is invalid: {problems}") from None


def run_loop(
    main: Coroutine[Any, Any, T],
    loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None,
) -> T:
    """Run `main` on uvloop (libuv's event loop): every socket read and write, the model calls',
    the database's and the API's, costs less CPU than on asyncio's own loop. Or on the loop
    `loop_factory` makes (`pressloop serve`'s, `runtime/loop_lanes.py`)."""
    if loop_factory is None:
        return uvloop.run(main)
    try:
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            return runner.run(main)
    finally:
        main.close()  # a no-op once run; unstarted (no loop could be made), no "never awaited"


def run_command(
    command: Coroutine[Any, Any, int],
    loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None,
) -> None:
    """Run one command; Pressloop's errors are shown as a red line, never as a traceback."""
    try:
        code = run_loop(command, loop_factory)
    except KeyboardInterrupt:
        errors.print("[yellow]interrupted[/]")
        raise typer.Exit(130) from None
    except USAGE_ERRORS as exc:
        errors.print(f"[bold red]error:[/] {escape(exc.message)}")
        raise typer.Exit(2) from None
    except PressloopError as exc:
        errors.print(f"[bold red]error:[/] {escape(exc.message)}")
        raise typer.Exit(1) from None
    except Exception as exc:
        if not _unreachable(exc):
            raise
        first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        errors.print(
            f"[bold red]error:[/] the database is not reachable: {escape(first_line)}\n"
            "hint: check PRESSLOOP_DATABASE_URL, or run `pressloop doctor`"
        )
        raise typer.Exit(1) from None
    raise typer.Exit(code)


def _unreachable(exc: Exception) -> bool:
    """A connection problem (not a bug): show one line instead of a traceback."""
    import sqlite3

    from sqlalchemy.exc import DBAPIError

    return isinstance(exc, OSError | DBAPIError | sqlite3.OperationalError)


@contextlib.asynccontextmanager
async def opened(settings: Settings | None = None) -> AsyncIterator[Service]:
    from pressloop.runtime.service import Service

    service = await Service.open(settings or load_settings())
    try:
        yield service
    finally:
        await service.close()


def local_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "cli"

"""`pressloop serve`: the HTTP API, an in-process worker and the scheduler, under uvicorn."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import uvicorn
import uvloop
from rich.console import Console
from rich.markup import escape

from pressloop.api import create_app
from pressloop.api.handover import HandingOverProtocol
from pressloop.cli_checks import site_credentials
from pressloop.config import Settings
from pressloop.errors import ConfigurationError, PressloopError
from pressloop.mcp_server.http import mount_mcp
from pressloop.observability.exposition import check_open_metrics_address
from pressloop.observability.logs import configure_logging
from pressloop.observability.tracing import setup_tracing, shutdown_tracing
from pressloop.private_files import private_dir, write_private
from pressloop.process_priority import lower_priority
from pressloop.providers.factory import relays_streams
from pressloop.runtime import collector
from pressloop.runtime.loop_lanes import LanesLoop
from pressloop.runtime.service import Service
from pressloop.serve_processes import ServingProcesses, reuse_port_sockets, shared_env
from pressloop.streamer.launch import StreamProcesses
from pressloop.ui import mount_ui

if TYPE_CHECKING:
    from pressloop.local_wordpress.local_site import LocalSite


def serving_loop(settings: Settings) -> asyncio.AbstractEventLoop:
    """`pressloop serve`'s event loop (PRESSLOOP_EVENT_LOOP): by default asyncio's with an urgent
    lane, where a model's streamed tokens go ahead of the rest of the work (a person waits for
    them; docs/benchmarks.md, section 3o), else uvloop."""
    if settings.event_loop == "uvloop":
        return uvloop.new_event_loop()
    return LanesLoop(poll_every_s=settings.loop_poll_every_s)


class Server(uvicorn.Server):
    """uvicorn re-raises SIGINT/SIGTERM once its graceful shutdown is done, which would end the
    process before the service is closed. Here the loop handles them and `serve()` returns."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, self.handle_exit, signum, None)
        try:
            yield
        finally:
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(signum)


async def first_admin_token(service: Service, settings: Settings, console: Console) -> None:
    """On the first start (no API token at all), make an admin token and write it only to
    DATA_DIR/admin-token (mode 0600): never to the terminal or the log, which only say where."""
    if await service.list_tokens():
        return
    _record, token = await service.create_token(name="admin", role="admin")
    path = (settings.data_dir / "admin-token").resolve()
    write_private(path, token + "\n")
    console.print(
        f"First start: an admin API token was made and saved to [bold]{escape(str(path))}[/] "
        "(mode 0600; sign in to the admin UI with it)",
        soft_wrap=True,
    )


async def local_wordpress(
    console: Console, settings: Settings
) -> tuple[Settings, LocalSite | None]:
    """With no PRESSLOOP_WP_URL, start (or restart) the site kept in DATA_DIR/wordpress, built
    with the same recipe the tests use, so a newcomer has a site to try the agent on."""
    if settings.wp_url:
        return settings, None
    from pressloop.local_wordpress.local_site import LocalSite

    site = LocalSite(root=settings.data_dir.resolve() / "wordpress")
    try:
        await asyncio.to_thread(site.start)
    except PressloopError as problem:
        console.print(f"[yellow]No local WordPress:[/] {problem.message}", soft_wrap=True)
        return settings, None
    console.print(
        f"Local WordPress: [bold]{site.url}[/] (wp-admin: {site.admin_user} / "
        f"{site.admin_password}); set PRESSLOOP_WP_URL to use your own site",
        soft_wrap=True,
    )
    return settings.model_copy(
        update={
            "wp_url": site.url,
            "wp_user": site.admin_user,
            "wp_app_password": site.app_password,
        }
    ), site


async def check_site(console: Console, settings: Settings) -> None:
    """Sign in to the site once at start, so wrong credentials show now, as a warning, rather
    than later as every site action's error (WordPress reads them as an anonymous visitor's)."""
    check = await site_credentials(settings)
    if check.outcome == "ok":
        console.print(f"WordPress: signed in to {escape(check.detail)}", soft_wrap=True)
        return
    console.print(f"[bold yellow]Warning, WordPress:[/] {escape(check.detail)}", soft_wrap=True)
    if check.hint:
        console.print(f"  hint: {escape(check.hint)}", soft_wrap=True, style="dim")


def step_aside_for_stream_processes(settings: Settings) -> None:
    """With stream processes (started before, at the priority this process had), this process
    runs turns at a lower one (PRESSLOOP_TURN_NICE; `process_priority.py`)."""
    if settings.streamer_control:
        lower_priority(settings.turn_nice)


async def serve_api(
    console: Console,
    settings: Settings,
    *,
    host: str | None,
    port: int | None,
    wordpress: bool = True,
    fd: int | None = None,
) -> int:
    """Serve until SIGINT/SIGTERM. `fd`: a listening socket inherited from the first of several
    serving processes (`serve_processes.py`), which has prepared everything else."""
    host = host or settings.host
    port = settings.port if port is None else port
    if fd is not None:
        return await _serve(console, settings, host, [], wordpress=False, fd=fd)
    # First: a port in use fails here, before a local WordPress or a stream process starts.
    sockets = listening_sockets(host, port, settings.serve_processes)
    try:
        return await _serve(console, settings, host, sockets, wordpress=wordpress, fd=None)
    finally:
        for sock in sockets:
            sock.close()


def listening_sockets(host: str, port: int, count: int) -> list[socket.socket]:
    """The serving processes' sockets (`serve_processes.reuse_port_sockets`); an address that
    cannot be listened on is the person's to change, said as such (not as a database
    problem, which any other OSError at the start is taken for)."""
    try:
        return reuse_port_sockets(host, port, count)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ConfigurationError(
            f"cannot listen on {host}:{port}: {reason} (another server on it? choose the "
            "address with --host/--port, PRESSLOOP_HOST/PRESSLOOP_PORT)"
        ) from exc


async def _serve(
    console: Console,
    settings: Settings,
    host: str,
    sockets: list[socket.socket],
    *,
    wordpress: bool,
    fd: int | None,
) -> int:
    """`sockets`: the first process's, bound; `fd`: a later process's one socket."""
    if settings.metrics_public:  # /metrics without a token: a loopback or private address only
        check_open_metrics_address(host, "PRESSLOOP_METRICS_PUBLIC")
    configure_logging(settings)  # PRESSLOOP_LOG_FORMAT: uvicorn's lines go the same way
    setup_tracing()  # OTEL_*: off unless an exporter is configured
    site = None
    private_dir(settings.data_dir)  # before anything is kept in it: the database, the site
    if wordpress and fd is None:
        settings, site = await local_wordpress(console, settings)
    if settings.wp_url and fd is None:
        await check_site(console, settings)
    streamer: StreamProcesses | None = None
    if settings.starts_stream_processes() and fd is None:
        if relays_streams(settings):
            # Their imports go on while this process opens its service and loads the model SDK
            # (both about a second): served once they serve, below.
            streamer = StreamProcesses.launch(settings)
            settings = streamer.processes[0].pointed(settings)
        elif settings.stream_process:  # asked for, not only on by default
            # Its parts would come from nowhere: the serving processes stream as they do.
            console.print(
                "[yellow]Note:[/] PRESSLOOP_STREAM_PROCESS reads OpenAI-compatible answers "
                "only: no stream process for this provider",
                soft_wrap=True,
            )
    try:
        service = await Service.open(settings)
    except BaseException:
        if streamer is not None:
            await asyncio.to_thread(streamer.stop)
        raise
    others: ServingProcesses | None = None
    unwatch_gc: Callable[[], None] | None = None
    stop_young: Callable[[], None] | None = None
    try:
        if fd is None:
            await first_admin_token(service, settings, console)
        # PRESSLOOP_SERVE_RUNS=0: no turn runs here, only in `pressloop worker` processes.
        service.runs_turns = settings.serve_runs
        app = mount_ui(create_app(service, run_worker=settings.serve_runs, run_scheduler=True))
        mount_mcp(app, service)  # MCP over streamable HTTP at /mcp
        # With a stream process, each request is lent its connection (`api/handover.py`).
        http = HandingOverProtocol if settings.streamer_control else "auto"
        server = Server(uvicorn.Config(app, log_level="info", log_config=None, http=http))
        # Before serving: the model SDK loaded and the start-up heap frozen, so neither the first
        # turn nor a full collection under load stops the loop for long (runtime/collector.py).
        unwatch_gc = collector.settle_process(settings, service.metrics, collector.SERVE_THRESHOLDS)
        stop_young = collector.collect_young_every(settings.gc_young_every_s)
        if streamer is not None:
            await asyncio.to_thread(streamer.wait_ready, settings.stream_ready_timeout_s)
        if fd is not None:
            console.print(f"Pressloop serving process {os.getpid()} on the shared port")
            step_aside_for_stream_processes(settings)
            await server.serve(sockets=[socket.socket(fileno=fd)])
            return 0
        port = sockets[0].getsockname()[1]
        address = f"http://{host}:{port}"
        console.print(f"Pressloop API on [bold]{address}[/] (docs at /docs)")
        first = (settings.data_dir / "admin-token").resolve()
        where = f"; the first admin token is in {escape(str(first))}" if first.exists() else ""
        console.print(f"Admin UI: [bold]{address}/ui[/] (sign in with an API token{where})")
        if not settings.serve_runs:
            console.print("Turns run only in `pressloop worker`s (PRESSLOOP_SERVE_RUNS=0)")
        if len(sockets) > 1:
            extra = [p.env() for p in streamer.processes[1:]] if streamer is not None else None
            others = ServingProcesses(sockets[1:], shared_env(settings), extra)
            console.print(f"{len(sockets)} serving processes share the port", soft_wrap=True)
            if service.database.is_sqlite:
                console.print(
                    "[yellow]Note:[/] on SQLite the processes' writes wait for each other "
                    "(PostgreSQL is the database for several processes)",
                    soft_wrap=True,
                )
        step_aside_for_stream_processes(settings)  # after starting the others: they do it too
        await server.serve(sockets=sockets[:1])
    finally:
        if others is not None:
            # Their turns' grace, then their close (PRESSLOOP_SHUTDOWN_GRACE, _STOP_TIMEOUT).
            wait_s = settings.shutdown_grace_s + settings.stop_timeout_s
            await asyncio.to_thread(others.stop, wait_s)
        await service.close()
        if streamer is not None:
            await asyncio.to_thread(streamer.stop)
        if unwatch_gc is not None:
            unwatch_gc()
        if stop_young is not None:
            stop_young()
        shutdown_tracing()  # the last spans exported
        if site is not None:
            await asyncio.to_thread(site.stop)
    console.print("Pressloop stopped.")
    return 0

"""`pressloop serve`: the HTTP API, an in-process worker and the scheduler, under uvicorn."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Iterator
from typing import TYPE_CHECKING

import uvicorn
from rich.console import Console

from pressloop.api import create_app
from pressloop.config import Settings
from pressloop.errors import PressloopError
from pressloop.runtime.service import Service

if TYPE_CHECKING:
    from pressloop.wordpress.local_site import LocalSite


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
    """On the first start (no API token at all), make an admin token and show it once."""
    if await service.list_tokens():
        return
    _record, token = await service.create_token(name="admin", role="admin")
    path = settings.data_dir / "admin-token"
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write(token + "\n")
    path.chmod(0o600)
    console.print(f"Admin token: [bold]{token}[/] (saved to {path})", soft_wrap=True)


async def local_wordpress(
    console: Console, settings: Settings
) -> tuple[Settings, LocalSite | None]:
    """With no PRESSLOOP_WP_URL, start (or restart) the site kept in DATA_DIR/wordpress, built
    with the same recipe the tests use, so a newcomer has a site to try the agent on."""
    if settings.wp_url:
        return settings, None
    from pressloop.wordpress.local_site import LocalSite

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


async def serve_api(
    console: Console,
    settings: Settings,
    *,
    host: str | None,
    port: int | None,
    wordpress: bool = True,
) -> int:
    host = host or settings.host
    port = settings.port if port is None else port
    site = None
    if wordpress:
        settings, site = await local_wordpress(console, settings)
    service = await Service.open(settings)
    try:
        await first_admin_token(service, settings, console)
        app = create_app(service, run_worker=True, run_scheduler=True)
        server = Server(uvicorn.Config(app, host=host, port=port, log_level="info"))
        address = f"http://{host}:{port}"
        console.print(f"Pressloop API on [bold]{address}[/] (docs at /docs)")
        console.print(f"Admin UI: [bold]{address}/ui[/] (sign in with an API token)")
        await server.serve()
    finally:
        await service.close()
        if site is not None:
            await asyncio.to_thread(site.stop)
    console.print("Pressloop stopped.")
    return 0

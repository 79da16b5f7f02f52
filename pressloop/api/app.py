"""The FastAPI application: REST + SSE over one `Service` (DESIGN.md section 10)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import PackageNotFoundError, version

from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from pressloop.api import agents, approvals, ledger, meta, runs, schedules, settings, threads
from pressloop.api.errors import error_response, install_error_handlers
from pressloop.api.sse import StreamTracker
from pressloop.runtime.service import Service
from pressloop.ui import mount_ui

# A message may be up to `max_message_chars` characters; JSON may spend 6 bytes on one (\uXXXX).
BYTES_PER_CHAR = 6
BODY_SLACK_BYTES = 64 * 1024


class BodyLimit:
    """Refuse a request whose declared body is larger than any valid request could be (413),
    before anything reads it."""

    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            length = dict(scope["headers"]).get(b"content-length")
            if length is not None and length.isdigit() and int(length) > self.max_bytes:
                response = error_response(
                    413,
                    "payload_too_large",
                    f"the request body has {int(length)} bytes; the limit is {self.max_bytes}",
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _version() -> str:
    try:
        return version("pressloop")
    except PackageNotFoundError:
        return "0.0.0"


def create_app(
    service: Service,
    *,
    run_worker: bool = False,
    run_scheduler: bool = False,
    sse_ping_s: float = 15.0,
    max_body_bytes: int | None = None,
) -> FastAPI:
    """The API over `service`. With `run_worker` (and `run_scheduler`) the app's lifespan runs an
    in-process worker (and the heartbeat scheduler), as `pressloop serve` does.

    The caller owns `service` and closes it after the app stops.
    """

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        service.start_listener()  # streams of runs other processes run (PostgreSQL)
        worker = service.start_worker() if run_worker else None
        scheduler = service.start_scheduler() if run_scheduler else None
        try:
            yield
        finally:
            if scheduler is not None:
                scheduler.stop()
            if worker is not None:
                await worker.stop()

    app = FastAPI(
        title="Pressloop",
        version=_version(),
        description="Run AI agents for WordPress sites. Every `/v1` route needs a bearer token.",
        lifespan=lifespan,
    )
    app.state.service = service
    app.state.sse_ping_s = sse_ping_s
    app.state.streams = StreamTracker()
    install_error_handlers(app)
    app.include_router(meta.router)
    app.include_router(threads.router)
    app.include_router(runs.router)
    app.include_router(schedules.router)
    app.include_router(approvals.router)
    app.include_router(ledger.router)
    app.include_router(agents.router)
    app.include_router(settings.router)
    mount_ui(app)
    limit = max_body_bytes or service.settings.max_message_chars * BYTES_PER_CHAR + BODY_SLACK_BYTES
    app.add_middleware(BodyLimit, max_bytes=limit)
    return app

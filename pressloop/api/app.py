"""The FastAPI application: REST + SSE over one `Service` (DESIGN.md section 10).

The admin UI sits on top of the API (it imports it; the API imports nothing of it): `pressloop
serve` mounts it on this app with `pressloop.ui.mount_ui`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from fastapi import Depends, FastAPI
from starlette.types import ASGIApp

from pressloop.api import (
    agents,
    approvals,
    ledger,
    mcp_servers,
    meta,
    metrics,
    runs,
    schedules,
    settings,
    threads,
    tokens,
)
from pressloop.api.body_limit import BodyLimit, default_limit
from pressloop.api.bounds import plain_text
from pressloop.api.docs import mount_docs
from pressloop.api.errors import install_error_handlers
from pressloop.api.headers import SecurityHeaders
from pressloop.api.openapi import document_errors, operation_id
from pressloop.api.sse import StreamTracker
from pressloop.observability.tracing import traced_asgi
from pressloop.runtime.service import Service


class PressloopApp(FastAPI):
    """FastAPI with its edges outside everything else, error handling included: security
    headers on every response (a 500 too), and the body limit before anything reads the
    request (authentication, parsing); outermost, the request's span when tracing is on."""

    def __init__(self, *, max_body_bytes: int, **options: Any) -> None:
        self.max_body_bytes = max_body_bytes
        # Smaller limits for some paths, set before the app serves (the UI's sign-in form).
        self.path_limits: dict[str, int] = {}
        super().__init__(**options)

    def build_middleware_stack(self) -> ASGIApp:
        inner = super().build_middleware_stack()
        limited = BodyLimit(inner, max_bytes=self.max_body_bytes, path_limits=self.path_limits)
        return traced_asgi(SecurityHeaders(limited))  # a span per request when tracing is on


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
) -> PressloopApp:
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

    docs = service.settings.api_docs
    app = PressloopApp(
        max_body_bytes=max_body_bytes
        or service.settings.max_body_bytes
        or default_limit(service.settings.max_message_chars),
        title="Pressloop",
        version=_version(),
        description="Run AI agents for WordPress sites. Every `/v1` route needs a bearer token.",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url="/openapi.json" if docs else None,
        generate_unique_id_function=operation_id,
        # Every path and query value must be text the database can store (else 422).
        dependencies=[Depends(plain_text)],
    )
    app.state.service = service
    app.state.sse_ping_s = sse_ping_s
    app.state.streams = StreamTracker()
    service.metrics.watch_streams(lambda: app.state.streams.open)  # pressloop_sse_streams_open
    install_error_handlers(app)
    app.include_router(meta.router)
    app.include_router(metrics.router)  # GET /metrics
    app.include_router(tokens.router)
    app.include_router(threads.router)
    app.include_router(runs.router)
    app.include_router(schedules.router)
    app.include_router(approvals.router)
    app.include_router(ledger.router)
    app.include_router(agents.router)
    app.include_router(settings.router)
    app.include_router(mcp_servers.router)
    document_errors(app)  # what each route can answer, in the OpenAPI document
    if docs:
        mount_docs(app)
    return app

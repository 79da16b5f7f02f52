"""`GET /metrics`: this process's metrics in Prometheus text (or OpenMetrics when asked), with
the gauges of the shared database read at scrape time (the queue, approvals pending).

An admin token (or an admin's UI session) is needed, unless PRESSLOOP_METRICS_PUBLIC is set,
which `pressloop serve` allows only on a loopback or private address
(pressloop/observability/exposition.py; docs/operations.md, "Metrics and logs").
"""

from __future__ import annotations

import logging
from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response
from fastapi.security import HTTPAuthorizationCredentials

from pressloop.api.auth import authenticated, bearer, has_role, service_of, session_cookie
from pressloop.api.errors import Forbidden
from pressloop.observability.exposition import render
from pressloop.runtime.observed import read_database

log = logging.getLogger(__name__)

router = APIRouter(tags=["meta"])


@router.get("/metrics", include_in_schema=False)
async def metrics(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    cookie: Annotated[str | None, Depends(session_cookie)],
) -> Response:
    service = service_of(request)
    if not service.settings.metrics_public:
        token = await authenticated(request, credentials, cookie)
        if not has_role(token, "admin"):
            raise Forbidden(
                f"/metrics needs the admin role; the token {token.name!r} is {token.role}"
            )
    gauges = service.metrics.database_gauges()
    try:
        gauges.reading = await read_database(service.database, service.now)
    except Exception as exc:  # the process's own metrics are still worth a scrape
        log.warning("/metrics: the database did not answer: %s", exc)
        gauges.reading = None
    body, content_type = render(service.metrics.registry, request.headers.get("accept"))
    return Response(content=body, headers={"Content-Type": content_type})

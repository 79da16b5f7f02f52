"""Health, the action catalog and usage counters (API tokens: `api/tokens.py`)."""

from __future__ import annotations

import asyncio
import logging
from typing import Literal

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse

from pressloop.api.auth import ServiceDep, Viewer
from pressloop.api.errors import error_response, error_responses
from pressloop.api.schemas import Health, UsageRow
from pressloop.contracts import CatalogEntry

log = logging.getLogger(__name__)

router = APIRouter(tags=["meta"])

HEALTH_TIMEOUT_S = 5.0


@router.get(
    "/healthz",
    response_model=Health,
    responses=error_responses(503),
)
async def healthz(service: ServiceDep) -> Health | JSONResponse:
    """Open to anyone: the service answers and its database answers a trivial query."""
    try:
        async with asyncio.timeout(HEALTH_TIMEOUT_S):
            await service.check_database()
    except Exception as exc:
        log.warning("health check: the database did not answer: %s", exc)
        return error_response(503, "database_unavailable", "the database did not answer")
    return Health(status="ok", database="ok")


@router.get("/v1/actions")
async def actions(service: ServiceDep, _who: Viewer) -> list[CatalogEntry]:
    """What the agent can do: each action's name, risk and parameter schema."""
    return service.registry.catalog()


@router.get("/v1/usage")
async def usage(
    service: ServiceDep,
    _who: Viewer,
    days: int = Query(default=30, ge=1, le=3660, description="The last N days, today included."),
    scope: Literal["user", "site"] | None = Query(default=None, description="Only this scope."),
) -> list[UsageRow]:
    await service.flush_usage()  # the rows include the turns that just ran in this process
    return [UsageRow.model_validate(row) for row in await service.usage(days=days, scope=scope)]

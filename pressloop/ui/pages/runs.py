"""Runs: the list (filter by status) and one run (timeline, steps with undo, attempts, lease)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from pressloop.api.auth import service_of
from pressloop.contracts import RunStatus
from pressloop.errors import InvalidRequest
from pressloop.ui.render import page
from pressloop.ui.session import User

router = APIRouter()


@router.get("/ui/runs")
async def runs(request: Request, user: User, status: str | None = None) -> Response:
    try:
        wanted = RunStatus(status) if status else None
    except ValueError:
        raise InvalidRequest(f"unknown run status {status!r}") from None
    listed = await service_of(request).list_runs(status=wanted, limit=200)
    return await page(
        request,
        "runs.html",
        user,
        "runs",
        runs=listed,
        status=status or "",
        statuses=[s.value for s in RunStatus],
    )


@router.get("/ui/runs/{run_id}")
async def run(request: Request, run_id: str, user: User) -> Response:
    service = service_of(request)
    record = await service.get_run(run_id)
    registry = service.registry
    undoable = [
        name for name in registry.names() if (spec := registry.get(name)) and spec.undo is not None
    ]
    return await page(
        request,
        "run.html",
        user,
        "runs",
        run=record,
        undoable=undoable,
    )

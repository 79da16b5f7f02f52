"""Approvals (pending first, with previews; then the history) and heartbeat schedules."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from pressloop.api.auth import service_of
from pressloop.ui.render import page
from pressloop.ui.session import User

router = APIRouter()

BEATS_SHOWN = 5


@router.get("/ui/approvals")
async def approvals(request: Request, user: User) -> Response:
    service = service_of(request)
    found = await service.approvals.find(limit=300)
    pending = [a for a in found if a.status == "pending"]
    history = [a for a in found if a.status != "pending"]
    return await page(
        request, "approvals.html", user, "approvals", pending=pending, history=history
    )


@router.get("/ui/schedules")
async def schedules(request: Request, user: User) -> Response:
    service = service_of(request)
    listed = await service.schedules.list()
    beats = await service.schedule_beats([s.id for s in listed], limit=BEATS_SHOWN)
    return await page(request, "schedules.html", user, "schedules", schedules=listed, beats=beats)

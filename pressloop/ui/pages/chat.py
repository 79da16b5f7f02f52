"""The chat console: pick or start a thread, talk to the agent, watch the turn live."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from pressloop.api.auth import service_of
from pressloop.contracts import RunStatus
from pressloop.ui.render import page
from pressloop.ui.session import User

router = APIRouter()

LIVE = {RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.WAITING_APPROVAL}


@router.get("/ui/chat")
async def chat(request: Request, user: User, thread: str | None = None) -> Response:
    service = service_of(request)
    threads = [t for t in await service.list_threads(limit=100) if t.parent_id is None]
    detail = await service.thread_detail(thread) if thread else None
    live_run = None
    if detail is not None:
        # The newest run still moving: the page follows it as if the turn had just started.
        live_run = next((r for r in detail["runs"] if r.status in LIVE), None)
    return await page(
        request,
        "chat.html",
        user,
        "chat",
        threads=threads,
        detail=detail,
        live_run=live_run,
    )

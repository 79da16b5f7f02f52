"""Threads: the list (status, last run, children) and one thread (messages, runs, children)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from pressloop.api.auth import service_of
from pressloop.ui.render import page
from pressloop.ui.session import User

router = APIRouter()


@router.get("/ui/threads")
async def threads(request: Request, user: User) -> Response:
    listed = await service_of(request).thread_overview(limit=200)
    return await page(
        request,
        "threads.html",
        user,
        "threads",
        threads=listed.threads,
        last_runs=listed.last_runs,
        children=listed.child_counts,
    )


@router.get("/ui/threads/{thread_id}")
async def thread(request: Request, thread_id: str, user: User) -> Response:
    service = service_of(request)
    detail = await service.thread_detail(thread_id)
    return await page(
        request,
        "thread.html",
        user,
        "threads",
        detail=detail,
        tree=await service.thread_tree(thread_id),
    )

"""Threads: the list (status, last run, children) and one thread (messages, runs, children)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from pressloop.api.auth import service_of
from pressloop.store import overview
from pressloop.store import threads as thread_store
from pressloop.store.records import ThreadRecord
from pressloop.ui.render import page
from pressloop.ui.session import User

router = APIRouter()


@router.get("/ui/threads")
async def threads(request: Request, user: User) -> Response:
    service = service_of(request)
    listed = await service.list_threads(limit=200)
    ids = [t.id for t in listed]
    async with service.database.read() as conn:
        last = await overview.last_runs(conn, ids)
        children = await overview.child_counts(conn, ids)
    return await page(
        request,
        "threads.html",
        user,
        "threads",
        threads=listed,
        last_runs=last,
        children=children,
    )


async def _descendants(request: Request, root: ThreadRecord) -> list[dict[str, object]]:
    """The tree of spawned children (depth <= 2 by design), each with its newest run."""
    service = service_of(request)
    tree: list[dict[str, object]] = []
    frontier = [(root, 0)]
    while frontier:
        parent, level = frontier.pop(0)
        async with service.database.read() as conn:
            kids = await thread_store.list_threads(conn, parent_id=parent.id)
            last = await overview.last_runs(conn, [k.id for k in kids])
        for kid in kids:
            tree.append({"thread": kid, "level": level + 1, "last_run": last.get(kid.id)})
            frontier.append((kid, level + 1))
    return tree


@router.get("/ui/threads/{thread_id}")
async def thread(request: Request, thread_id: str, user: User) -> Response:
    detail = await service_of(request).thread_detail(thread_id)
    return await page(
        request,
        "thread.html",
        user,
        "threads",
        detail=detail,
        tree=await _descendants(request, detail["thread"]),
    )

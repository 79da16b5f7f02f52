"""Threads: create, list, and show one with its messages, runs and child threads."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query

from pressloop.api.auth import Operator, ServiceDep, Viewer
from pressloop.api.bounds import Id
from pressloop.api.errors import Forbidden
from pressloop.api.schemas import RunOut, ThreadCreate, ThreadDetail, ThreadOut
from pressloop.contracts import Trigger
from pressloop.errors import InvalidRequest
from pressloop.policy import resolve_policy
from pressloop.store.records import TokenRecord

router = APIRouter(prefix="/v1/threads", tags=["threads"])


def _check_thread_policy(metadata: dict[str, Any], who: TokenRecord) -> None:
    """A thread policy may loosen the defaults (DESIGN.md section 6), so only admins set one;
    its fields are checked by its schema, and the whole against every trigger now rather than
    failing every later run of the thread."""
    if "policy" not in metadata:
        return
    if who.role != "admin":
        raise Forbidden("setting a thread policy (metadata.policy) needs the admin role")
    try:
        for trigger in Trigger:
            resolve_policy(trigger, thread=metadata["policy"])
    except InvalidRequest as exc:
        raise InvalidRequest(f"metadata.policy is not a valid policy: {exc}") from None


@router.post("", status_code=201)
async def create_thread(body: ThreadCreate, service: ServiceDep, who: Operator) -> ThreadOut:
    metadata = body.metadata_dict()
    _check_thread_policy(metadata, who)
    thread = await service.create_thread(title=body.title, metadata=metadata, created_by=who.name)
    return ThreadOut.of(thread)


@router.get("")
async def list_threads(
    service: ServiceDep, _who: Viewer, limit: int = Query(default=50, ge=1, le=500)
) -> list[ThreadOut]:
    return [ThreadOut.of(t) for t in await service.list_threads(limit=limit)]


@router.get("/{thread_id}")
async def show_thread(thread_id: Id, service: ServiceDep, _who: Viewer) -> ThreadDetail:
    detail = await service.thread_detail(thread_id)
    return ThreadDetail(
        thread=ThreadOut.of(detail["thread"]),
        messages=detail["messages"],
        runs=[RunOut.of(r) for r in detail["runs"]],
        children=[ThreadOut.of(c) for c in detail["children"]],
    )

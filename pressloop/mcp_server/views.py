"""What MCP clients read: approvals, threads and runs as plain JSON (tool results, resources).

The records come from the Service (the store's record types, or their shape: an approval is
read through `ApprovalLike`, since this layer names no store module but `records`).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Protocol

from pydantic_core import to_jsonable_python

from pressloop.contracts import Event, Message
from pressloop.store.records import RunRecord, ThreadRecord


class ApprovalLike(Protocol):
    """The fields of an approval an MCP client is shown (`store.approvals.ApprovalRecord`)."""

    id: str
    run_id: str
    thread_id: str
    step_index: int
    action: str
    params: dict[str, Any]
    risk: str
    trigger: str
    reason: str
    preview: Any
    status: str
    decided_by: str | None
    note: str | None
    untrusted: list[dict[str, Any]] | None
    created_at: datetime
    expires_at: datetime
    decided_at: datetime | None

    @property
    def run_params(self) -> dict[str, Any]: ...

    @property
    def asked_by(self) -> str: ...


def as_json(value: Any) -> str:
    return json.dumps(to_jsonable_python(value), ensure_ascii=False, indent=2)


def approval_view(approval: ApprovalLike) -> dict[str, Any]:
    view = {
        "id": approval.id,
        "status": approval.status,
        "action": approval.action,
        "params": approval.params,
        "run_params": approval.run_params,
        "risk": approval.risk,
        "reason": approval.reason,
        "preview": approval.preview,
        "asked_by": approval.asked_by,
        "run_id": approval.run_id,
        "thread_id": approval.thread_id,
        "step_index": approval.step_index,
        # Why it waits for a person whatever the policy says: untrusted text the model had read.
        "untrusted": approval.untrusted,
        "created_at": approval.created_at,
        "expires_at": approval.expires_at,
        "decided_by": approval.decided_by,
        "decided_at": approval.decided_at,
        "note": approval.note,
    }
    return dict(to_jsonable_python(view))


def thread_view(thread: ThreadRecord) -> dict[str, Any]:
    view = {
        "id": thread.id,
        "title": thread.title,
        "status": thread.status,
        "agent_id": thread.agent_id,
        "parent_id": thread.parent_id,
        "created_by": thread.created_by,
        "created_at": thread.created_at,
        "updated_at": thread.updated_at,
    }
    return dict(to_jsonable_python(view))


def run_summary(run: RunRecord) -> dict[str, Any]:
    view = {
        "id": run.id,
        "thread_id": run.thread_id,
        "trigger": run.trigger,
        "status": run.status,
        "input": run.input,
        "requesting_user": run.requesting_user,
        "attempt": run.attempt,
        "created_at": run.created_at,
        "finished_at": run.finished_at,
    }
    return dict(to_jsonable_python(view))


def run_view(run: RunRecord, events: list[Event]) -> dict[str, Any]:
    view = {
        **run_summary(run),
        "max_attempts": run.max_attempts,
        "started_at": run.started_at,
        "result": run.result,
        "usage": run.usage,
        "error": run.error,
        "events": events,
    }
    return dict(to_jsonable_python(view))


def thread_detail_view(
    thread: ThreadRecord, messages: list[Message], runs: list[RunRecord]
) -> dict[str, Any]:
    return {
        **thread_view(thread),
        "messages": [m.model_dump(mode="json") for m in messages],
        "runs": [run_summary(r) for r in runs],
    }

"""Approvals: the queue of steps waiting for a person, and the decisions."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, Query
from pydantic import Field

from pressloop.api.auth import Operator, ServiceDep, Viewer
from pressloop.api.errors import error_responses
from pressloop.api.schemas import RecordOut, Request
from pressloop.contracts import UntrustedSource

router = APIRouter(prefix="/v1/approvals", tags=["approvals"])


class ApprovalOut(RecordOut):
    id: str
    run_id: str
    thread_id: str
    step_index: int
    action: str
    params: dict[str, Any] = Field(description="The params the agent asked for.")
    run_params: dict[str, Any] = Field(
        description="The params the step runs (or ran) with: `edited_params` when a person "
        "edited them, else `params`."
    )
    risk: str
    trigger: str = Field(description="What started the run: chat, heartbeat, api, ...")
    asked_by: str = Field(
        description="Who asked, for people: the person behind the run and the trigger, "
        "`ann (chat)`; `heartbeat (no person)` when no person did."
    )
    reason: str
    preview: Any = Field(description="What would change (e.g. the fields before and after).")
    status: str = Field(description="pending, approved, rejected, expired or cancelled.")
    requested_by: str | None = Field(description="The person behind the run, if any.")
    decided_by: str | None
    note: str | None
    edited_params: dict[str, Any] | None = Field(
        description="The params a person approved the step with instead of `params`."
    )
    run_status: str | None = Field(default=None, description="The run's status now.")
    step: str | None = Field(
        default=None,
        description="What became of the step (its ledger fate): ran, failed, rejected, denied, "
        "refused, cancelled, unknown; `waiting` until it has one.",
    )
    step_summary: str | None = Field(default=None, description="What the step did, in a line.")
    untrusted: list[UntrustedSource] | None = Field(
        default=None,
        description="The untrusted text (site, web, marked memory) in front of the model when it "
        "asked: why this step needs a person whatever the policy says. None: a clean turn.",
    )
    created_at: datetime
    expires_at: datetime
    decided_at: datetime | None


class Approve(Request):
    note: str | None = Field(default=None, max_length=2000)
    params: dict[str, Any] | None = Field(
        default=None,
        description="Run the step with these params instead (never a secret such as a "
        "password: those are not stored, so they cannot wait in an approval).",
    )


class Reject(Request):
    note: str | None = Field(default=None, max_length=2000, description="Told to the agent.")


@router.get("")
async def list_approvals(
    service: ServiceDep,
    _who: Viewer,
    status: str | None = Query(
        default=None, pattern="^(pending|approved|rejected|expired|cancelled)$"
    ),
    limit: int = Query(default=100, ge=1, le=500),
) -> list[ApprovalOut]:
    """Pending first (soonest to expire first), then the history."""
    return [ApprovalOut.of(a) for a in await service.approvals.find(status=status, limit=limit)]


@router.get("/{approval_id}")
async def show_approval(approval_id: str, service: ServiceDep, _who: Viewer) -> ApprovalOut:
    return ApprovalOut.of(await service.approvals.get(approval_id))


@router.post("/{approval_id}/approve", responses=error_responses(404, 409, 422))
async def approve(
    approval_id: str, body: Approve, service: ServiceDep, who: Operator
) -> ApprovalOut:
    """Run the step (optionally with edited params); the agent's loop resumes.

    Edited params are checked now: invalid, the answer is 422 with the reason and the approval
    stays pending. An approved step runs even when a daily budget was used up meanwhile (the
    approval is the person's decision) and counts against it."""
    decided = await service.decide(
        approval_id, approve=True, by=who.name, note=body.note, params=body.params
    )
    service.start_run_soon(decided.run_id)
    return ApprovalOut.of(decided)


@router.post("/{approval_id}/reject", responses=error_responses(404, 409))
async def reject(approval_id: str, body: Reject, service: ServiceDep, who: Operator) -> ApprovalOut:
    """Skip the step; the agent is told and its loop resumes."""
    decided = await service.decide(approval_id, approve=False, by=who.name, note=body.note)
    service.start_run_soon(decided.run_id)
    return ApprovalOut.of(decided)

"""The action ledger of a run, and undo of a step."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from fastapi import APIRouter
from pydantic import BaseModel

from pressloop.api.auth import Operator, ServiceDep, Viewer
from pressloop.api.bounds import Id, SeqNumber
from pressloop.api.errors import error_responses
from pressloop.api.schemas import RecordOut
from pressloop.contracts import ActionOutcome, Risk

router = APIRouter(tags=["ledger"])


class LedgerOut(RecordOut):
    id: int
    run_id: str
    step_index: int
    call_id: str
    action: str
    params: dict[str, Any]
    risk: Risk
    status: Literal["intent", "done"]
    # What became of the step, whether or not it reached the site (`store/ledger.py`).
    fate: Literal["ran", "failed", "rejected", "denied", "refused", "cancelled", "unknown"]
    outcome: ActionOutcome | None
    snapshot: Any
    undo_state: Literal["undoing", "undone"] | None
    created_at: datetime
    finished_at: datetime | None


class Undone(BaseModel):
    ledger_id: int
    action: str
    undone: bool
    summary: str


@router.get("/v1/runs/{run_id}/ledger")
async def run_ledger(run_id: Id, service: ServiceDep, _who: Viewer) -> list[LedgerOut]:
    """The run's write and destructive steps, each with its snapshot and undo state."""
    return [LedgerOut.of(e) for e in await service.ledger(run_id)]


@router.post("/v1/ledger/{entry_id}/undo", responses=error_responses(409))
async def undo(entry_id: SeqNumber, service: ServiceDep, who: Operator) -> Undone:
    """Reverse a done step from its snapshot (once; 409 if it cannot be undone)."""
    return Undone.model_validate(await service.undo(entry_id, by=who.name))

"""The action ledger of a run, and undo of a step."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel

from pressloop.api.auth import Operator, ServiceDep, Viewer
from pressloop.contracts import ActionOutcome
from pressloop.store.ledger import LedgerEntry

router = APIRouter(tags=["ledger"])


class LedgerOut(BaseModel):
    id: int
    run_id: str
    step_index: int
    call_id: str
    action: str
    params: dict[str, Any]
    risk: str
    status: str
    outcome: ActionOutcome | None
    snapshot: Any
    undo_state: str | None
    created_at: datetime
    finished_at: datetime | None

    @classmethod
    def of(cls, entry: LedgerEntry) -> LedgerOut:
        return cls.model_validate(entry.__dict__)


class Undone(BaseModel):
    ledger_id: int
    action: str
    undone: bool
    summary: str


@router.get("/v1/runs/{run_id}/ledger")
async def run_ledger(run_id: str, service: ServiceDep, _who: Viewer) -> list[LedgerOut]:
    """The run's write and destructive steps, each with its snapshot and undo state."""
    return [LedgerOut.of(e) for e in await service.ledger(run_id)]


@router.post("/v1/ledger/{entry_id}/undo")
async def undo(entry_id: int, service: ServiceDep, who: Operator) -> Undone:
    """Reverse a done step from its snapshot (once; 409 if it cannot be undone)."""
    return Undone.model_validate(await service.undo(entry_id, by=who.name))

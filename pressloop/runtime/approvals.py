"""Approvals: the gate the executor consults for `confirm` steps, and what people do with them.

A step that needs a person creates a pending approval (durably, fenced, before the run pauses)
and the run rests in `waiting_approval`. Approving (optionally with edited params) or rejecting
requeues the run in the same transaction; the resumed turn runs or skips the step and the model
goes on. Pending approvals expire (PRESSLOOP_APPROVAL_EXPIRY, default 1 h) into a reject.
Edited params are validated when the person approves (invalid: 422, still pending). An approved
step runs even when a daily budget is used up meanwhile: the approval is the person's explicit
decision (`runtime/budget_gate.py`); it is counted like any action.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncConnection

from pressloop.actions.executor import ApprovalDecision, validation_message
from pressloop.actions.registry import ActionServices, ActionSpec, Registry
from pressloop.clock import Now
from pressloop.contracts import ActionCall, ActionContext, RunStatus
from pressloop.errors import Conflict, InvalidRequest, NotFound
from pressloop.observability.tracing import note_approval
from pressloop.redaction import secret_values
from pressloop.runtime.session import RunSession
from pressloop.store import approvals as approval_store
from pressloop.store.approvals import ApprovalRecord
from pressloop.store.db import Database

log = logging.getLogger(__name__)

UNTRUSTED_KEPT = 5  # the newest untrusted texts an approval names


class SessionApprovals:
    """The executor's gate for one claimed run."""

    def __init__(self, session: RunSession, services: ActionServices, expiry_s: float) -> None:
        self.session = session
        self.services = services
        self.expiry_s = expiry_s

    async def decision(self, context: ActionContext) -> ApprovalDecision | None:
        async with self.session.database.read() as conn:
            found = await approval_store.find_for_step(conn, context.run_id, context.step_index)
        if found is None:
            return None
        if found.decided_at is not None:  # the action's span says how long the person took
            waited = (found.decided_at - found.created_at).total_seconds()
            note_approval(found.id, found.status, waited)
        return ApprovalDecision(
            approval_id=found.id,
            status=found.status,
            note=found.note,
            decided_by=found.decided_by,
            edited_params=found.edited_params,
        )

    async def request(
        self, spec: ActionSpec, call: ActionCall, params: Any, context: ActionContext
    ) -> str:
        preview: Any = {"params": call.params}
        if spec.preview is not None:
            try:
                preview = await spec.preview(params, context, self.services)
            except Exception as exc:  # the approver still sees the params and why it failed
                preview = {"params": call.params, "preview_error": str(exc)}
        now = self.session.now()

        async def write(conn: AsyncConnection) -> str:
            record = await approval_store.create_approval(
                conn,
                now=now,
                run_id=context.run_id,
                thread_id=context.thread_id,
                step_index=context.step_index,
                call_id=call.id,
                action=call.name,
                params=call.params,
                risk=spec.risk.value,
                trigger=context.trigger.value,
                reason=context.reason[:2000],
                preview=preview,
                untrusted=[s.model_dump() for s in context.untrusted[-UNTRUSTED_KEPT:]] or None,
                requested_by=context.requesting_user,
                expires_at=now + timedelta(seconds=self.expiry_s),
            )
            return record.id

        return await self.session.write(write)


class Approvals:
    """What people (API, CLI, UI) do with approvals."""

    def __init__(self, database: Database, now: Now, registry: Registry | None = None) -> None:
        self.database = database
        self.now = now
        self.registry = registry

    async def find(self, *, status: str | None = None, limit: int = 100) -> list[ApprovalRecord]:
        async with self.database.read() as conn:
            return await approval_store.list_approvals(conn, status=status, limit=limit)

    async def get(self, approval_id: str) -> ApprovalRecord:
        async with self.database.read() as conn:
            found = await approval_store.get_approval(conn, approval_id)
        if found is None:
            raise NotFound(f"approval {approval_id!r} does not exist")
        return found

    async def decide(
        self,
        approval_id: str,
        *,
        approve: bool,
        by: str | None,
        note: str | None = None,
        params: dict[str, Any] | None = None,
    ) -> ApprovalRecord:
        current = await self.get(approval_id)
        if current.status == "pending" and current.run_status == RunStatus.CANCELLED.value:
            raise Conflict(
                f"approval {approval_id} can no longer be decided: its run {current.run_id} was "
                "cancelled"
            )
        if approve and params is not None:
            self._refuse_secrets(current.action, params)
            self._refuse_invalid(current.action, params)
        async with self.database.write() as conn:
            decided = await approval_store.decide(
                conn,
                approval_id,
                status="approved" if approve else "rejected",
                now=self.now(),
                decided_by=by,
                note=note,
                edited_params=params if approve else None,
            )
        if decided is None:
            raise Conflict(f"approval {approval_id} is already {current.status}")
        return decided

    def _refuse_secrets(self, action: str, params: dict[str, Any]) -> None:
        """Edited params may not carry a secret (a password): it would be stored with the
        decision until the run resumes, and secrets are never stored."""
        spec = self.registry.get(action) if self.registry is not None else None
        given = [n for n in (spec.secret_params() if spec else []) if secret_values(params, [n])]
        if given:
            raise InvalidRequest(
                f"the edited params set {', '.join(given)}: Pressloop never stores secrets, so "
                "they cannot be given with an approval; approve without it and set it in "
                "WordPress instead"
            )

    def _refuse_invalid(self, action: str, params: dict[str, Any]) -> None:
        """Edited params are checked when a person approves, not when the step runs: invalid,
        the approval is refused (422) and stays pending, so the person can fix them."""
        spec = self.registry.get(action) if self.registry is not None else None
        if spec is None:
            return
        try:
            spec.params.model_validate(params)
        except ValidationError as invalid:
            raise InvalidRequest(
                f"the edited params for {action} are invalid: {validation_message(invalid)}. "
                "The approval is still pending: fix them, or approve without edits"
            ) from None

    async def expire_due(self) -> list[ApprovalRecord]:
        async with self.database.write() as conn:
            expired = await approval_store.expire_due(conn, now=self.now())
        for record in expired:
            log.info("approval %s expired; run %s resumes", record.id, record.run_id)
        return expired

"""The executor: the one pipeline every action call goes through, whoever asked for it.

validate params -> policy (allow | confirm | deny by risk and trigger) -> the untrusted-content
guard (`guard.py`: in a tainted turn destructive and sensitive steps need a person) -> approval
gate -> ledger (replay a finished step, reconcile an interrupted one, else record the intent) ->
execute -> ledger outcome. The snapshot an action takes for undo is kept with its intent. Secret
params never reach the ledger, approvals or what the model is told (`guard.py`).

Reads are not ledgered: running a read twice changes nothing. Every write and destructive step
happens at most once per (run, step): a step found with an intent but no outcome (the worker died
in between) is reconciled by the action's own check before anything is sent again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import ValidationError

from pressloop.actions.guard import (
    guarded_mode,
    redacted,
    scrubbed,
    secret_not_kept,
    secret_refusal,
)
from pressloop.actions.ledger_port import LedgerPort
from pressloop.actions.registry import ActionResult, ActionServices, ActionSpec, Registry
from pressloop.contracts import (
    ActionCall,
    ActionContext,
    ActionOutcome,
    CatalogEntry,
    PolicyMode,
    Risk,
    StepStatus,
)
from pressloop.errors import ActionError, RunFailure, SiteError
from pressloop.redaction import secret_values


@dataclass(kw_only=True, frozen=True)
class ApprovalDecision:
    approval_id: str
    status: str  # "pending" | "approved" | "rejected" | "expired"
    note: str | None = None
    decided_by: str | None = None
    edited_params: dict[str, Any] | None = None


class ApprovalGate(Protocol):
    """Approvals for `confirm` calls: what a person decided for this step, or a new request
    (the run then pauses until someone decides or the approval expires)."""

    async def decision(self, context: ActionContext) -> ApprovalDecision | None: ...

    async def request(
        self, spec: ActionSpec, call: ActionCall, params: Any, context: ActionContext
    ) -> str: ...


def _validation_message(error: ValidationError) -> str:
    parts = []
    for item in error.errors()[:8]:
        where = ".".join(str(p) for p in item["loc"]) or "params"
        parts.append(f"{where}: {item['msg']}")
    return "; ".join(parts)


def _content(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)


class Executor:
    def __init__(
        self,
        registry: Registry,
        services: ActionServices | None = None,
        *,
        approvals: ApprovalGate | None = None,
        ledger: LedgerPort | None = None,
    ) -> None:
        self.registry = registry
        self.services = services or ActionServices()
        self.approvals = approvals
        self.ledger = ledger

    def catalog(self) -> list[CatalogEntry]:
        return self.registry.catalog()

    async def run(self, call: ActionCall, context: ActionContext) -> ActionOutcome:
        spec = self.registry.get(call.name)
        if spec is None:
            return _failed(
                f"unknown action {call.name!r}; available actions: "
                + ", ".join(self.registry.names())
            )
        if "_raw_arguments" in call.params:
            return _failed(
                f"the arguments for {call.name} were not valid JSON: "
                f"{str(call.params['_raw_arguments'])[:200]}",
                spec,
            )
        try:
            params = spec.params.model_validate(call.params)
        except ValidationError as invalid:
            return _failed(
                f"invalid params for {call.name}: {_validation_message(invalid)}. "
                "Fix them and call the action again.",
                spec,
            )
        # Content from the site or the web may carry instructions: in a tainted turn a
        # destructive or sensitive step always goes past a person first.
        mode = guarded_mode(
            spec, params, context, self.services, context.policy.mode_for(spec.risk)
        )
        if isinstance(mode, ActionOutcome):
            return mode
        if mode is PolicyMode.DENY:
            message = (
                f"denied: the policy for {context.trigger.value} runs forbids {spec.risk.value} "
                f"actions such as {call.name}"
            )
            return ActionOutcome(
                status=StepStatus.DENIED, content=message, summary=message, risk=spec.risk
            )
        if mode is PolicyMode.CONFIRM:
            return await self._confirm(spec, call, params, context)
        return await self._proceed(spec, call, params, context)

    async def _proceed(
        self, spec: ActionSpec, call: ActionCall, params: Any, context: ActionContext
    ) -> ActionOutcome:
        if self.ledger is None or spec.risk is Risk.READ:
            return await self._execute(spec, params, context)
        return await self._execute_once(spec, call, params, context, self.ledger)

    async def _execute_once(
        self,
        spec: ActionSpec,
        call: ActionCall,
        params: Any,
        context: ActionContext,
        ledger: LedgerPort,
    ) -> ActionOutcome:
        prior = await ledger.lookup(context)
        if prior is not None and prior.action == spec.name:
            if prior.outcome is not None:
                return prior.outcome  # already done: the stored result, the site untouched
            try:
                found = (
                    await spec.reconcile(params, context, self.services) if spec.reconcile else None
                )
            except ActionError as failure:
                if failure.retryable:
                    raise
                # Not knowing must never become doing it twice: the step fails, once.
                outcome = _action_failed(spec, failure)
                await ledger.outcome(context, outcome)
                return outcome
            if found is not None:
                outcome = _succeeded(spec, found)
            elif spec.reconcile is None:
                outcome = _failed(
                    f"the outcome of {spec.name} is unknown: the worker stopped while it ran. "
                    "Check whether it took effect before trying again.",
                    spec,
                )
            else:
                outcome = await self._execute(spec, params, context)  # it had not happened
            await ledger.outcome(context, outcome)
            return outcome
        try:
            snapshot = (
                await spec.snapshot(params, context, self.services) if spec.snapshot else None
            )
        except ActionError as failure:  # e.g. the post to change does not exist
            if failure.retryable:
                raise
            return _action_failed(spec, failure)
        await ledger.intent(redacted(spec, call), spec.risk, context, snapshot)
        outcome = await self._execute(spec, params, context)
        await ledger.outcome(context, outcome)
        return outcome

    async def _confirm(
        self, spec: ActionSpec, call: ActionCall, params: Any, context: ActionContext
    ) -> ActionOutcome:
        if self.approvals is None:
            return _denied(
                f"denied: {call.name} needs a person's approval and no approval service is "
                "available here",
                spec,
            )
        decided = await self.approvals.decision(context)
        if decided is None:
            refusal = secret_refusal(spec, call)
            if refusal is not None:
                return refusal
            approval_id = await self.approvals.request(spec, redacted(spec, call), params, context)
            return _pending(spec, call, approval_id)
        if decided.status == "pending":
            return _pending(spec, call, decided.approval_id)
        if decided.status != "approved":
            why = decided.note or (
                "expired without a decision" if decided.status == "expired" else "no reason given"
            )
            message = (
                f"{decided.status}: a person did not approve {call.name} ({why}). Do not try "
                "to do it another way; tell the person."
            )
            return ActionOutcome(
                status=StepStatus.REJECTED,
                content=message,
                summary=message,
                risk=spec.risk,
                approval_id=decided.approval_id,
            )
        if decided.edited_params is not None:
            try:
                params = spec.params.model_validate(decided.edited_params)
            except ValidationError as invalid:
                return _failed(
                    f"the approved, edited params for {call.name} are invalid: "
                    f"{_validation_message(invalid)}",
                    spec,
                )
            call = call.model_copy(update={"params": decided.edited_params})
        outcome = await self._proceed(spec, call, params, context)
        return outcome.model_copy(update={"approval_id": decided.approval_id})

    async def _execute(
        self, spec: ActionSpec, params: Any, context: ActionContext
    ) -> ActionOutcome:
        not_kept = secret_not_kept(spec, params)
        if not_kept is not None:
            return not_kept
        secrets = secret_values(params.model_dump(), spec.secret_params())
        try:
            result: ActionResult = await spec.handler(params, context, self.services)
        except ActionError as failure:
            if failure.retryable:
                raise
            return scrubbed(_action_failed(spec, failure), secrets)
        except RunFailure:
            raise
        # What the model is told and the ledger keeps never echoes a secret the site sent back.
        return scrubbed(_succeeded(spec, result), secrets)


def _succeeded(spec: ActionSpec, result: ActionResult) -> ActionOutcome:
    return ActionOutcome(
        status=StepStatus.SUCCEEDED,
        content=_content(result.content),
        summary=result.summary,
        risk=spec.risk,
        untrusted=result.untrusted or spec.untrusted_output,
        data=result.content,
    )


def _denied(message: str, spec: ActionSpec) -> ActionOutcome:
    return ActionOutcome(status=StepStatus.DENIED, content=message, summary=message, risk=spec.risk)


def _pending(spec: ActionSpec, call: ActionCall, approval_id: str) -> ActionOutcome:
    message = f"waiting for a person to approve {call.name} (approval {approval_id})"
    return ActionOutcome(
        status=StepStatus.PENDING_APPROVAL,
        content=message,
        summary=message,
        risk=spec.risk,
        approval_id=approval_id,
    )


def _failed(message: str, spec: ActionSpec | None = None, data: Any = None) -> ActionOutcome:
    return ActionOutcome(
        status=StepStatus.FAILED,
        content=f"error: {message}",
        summary=message,
        risk=spec.risk if spec else None,
        error=message,
        data=data,
    )


def _site_answer(failure: BaseException) -> SiteError | None:
    """The site's error answer behind a failure, also when an action re-raised it with a
    clearer message (`raise ActionError("there is no post 9") from answer`)."""
    current: BaseException | None = failure
    for _depth in range(8):  # a cause chain is short; never loop on a cycle
        if current is None or isinstance(current, SiteError):
            return current
        current = current.__cause__
    return None


def _action_failed(spec: ActionSpec, failure: ActionError) -> ActionOutcome:
    """A failed step whose message, and `data.error` in the ledger, carry the site's HTTP
    status and error code when the site answered with one (404 rest_post_invalid_id)."""
    message = f"{spec.name} failed: {failure.message}"
    answer = _site_answer(failure)
    if answer is None:
        return _failed(message, spec)
    said = f"{answer.status} {answer.site_code}" if answer.site_code else str(answer.status)
    if said not in message:
        message += f" (the site answered {said})"
    error = {"status": answer.status, "code": answer.site_code}
    return _failed(message, spec, data={"error": error})

"""The executor: the one pipeline every action call goes through, whoever asked for it.

validate params -> policy (allow | confirm | deny by risk and trigger) -> the untrusted-content
guard (`guard.py`: in a tainted turn destructive and sensitive steps need a person) -> approval
gate -> ledger (replay a finished step, reconcile an interrupted one) -> daily budget (a step a
person approved runs whatever it says) -> snapshot -> ledger intent -> execute -> ledger
outcome. The snapshot an action takes for undo is kept with its intent. Secret params never
reach the ledger, approvals or what the model is told (`guard.py`).

Reads are not ledgered: running a read twice changes nothing. Every write and destructive step
gets one ledger row whatever its fate (ran, failed, rejected, denied, refused, unknown), and
happens at most once per (run, step): a step found with an intent but no outcome (the worker died
in between) is reconciled by the action's own check before anything is sent again, and so is a
step whose answer does not say whether it took effect (a timeout, a 5xx, a cut-off or unreadable
body after the write was sent), at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import ValidationError

from pressloop.actions.budget_port import BudgetPort
from pressloop.actions.guard import (
    guarded_mode,
    redacted,
    scrubbed,
    secret_not_kept,
    secret_refusal,
    storable_outcome,
)
from pressloop.actions.ledger_port import LedgerPort
from pressloop.actions.outcomes import (
    NOT_RUN,
    action_failed,
    content,
    denied,
    failed,
    outcome_unknown,
    pending,
    refused,
    succeeded,
    unknown,
)
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
from pressloop.errors import ActionError, RunFailure
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


def validation_message(error: ValidationError) -> str:
    parts = []
    for item in error.errors()[:8]:
        where = ".".join(str(p) for p in item["loc"]) or "params"
        parts.append(f"{where}: {item['msg']}")
    return "; ".join(parts)


class Executor:
    def __init__(
        self,
        registry: Registry,
        services: ActionServices | None = None,
        *,
        approvals: ApprovalGate | None = None,
        ledger: LedgerPort | None = None,
        budget: BudgetPort | None = None,
    ) -> None:
        self.registry = registry
        self.services = services or ActionServices()
        self.approvals = approvals
        self.ledger = ledger
        self.budget = budget

    def catalog(self) -> list[CatalogEntry]:
        return self.registry.catalog()

    async def run(self, call: ActionCall, context: ActionContext) -> ActionOutcome:
        spec = self.registry.get(call.name)
        if spec is None:
            return failed(
                f"unknown action {call.name!r}; available actions: "
                + ", ".join(self.registry.names())
            )
        if "_raw_arguments" in call.params:
            return await self._settle(
                spec,
                call,
                context,
                failed(
                    f"the arguments for {call.name} were not valid JSON: "
                    f"{str(call.params['_raw_arguments'])[:200]}",
                    spec,
                ),
            )
        try:
            params = spec.params.model_validate(call.params)
        except ValidationError as invalid:
            message = (
                f"invalid params for {call.name}: {validation_message(invalid)}. "
                "Fix them and call the action again."
            )
            return await self._settle(spec, call, context, failed(message, spec))
        # Content from the site or the web may carry instructions: in a tainted turn a
        # destructive or sensitive step always goes past a person first.
        mode = guarded_mode(
            spec, params, context, self.services, context.policy.mode_for(spec.risk)
        )
        if isinstance(mode, ActionOutcome):
            return await self._settle(spec, call, context, mode)
        if mode is PolicyMode.DENY:
            message = (
                f"denied: the policy for {context.trigger.value} runs forbids {spec.risk.value} "
                f"actions such as {call.name}"
            )
            return await self._settle(spec, call, context, denied(message, spec))
        if mode is PolicyMode.CONFIRM:
            return await self._confirm(spec, call, params, context)
        return await self._proceed(spec, call, params, context, approved=False)

    async def _settle(
        self, spec: ActionSpec, call: ActionCall, context: ActionContext, outcome: ActionOutcome
    ) -> ActionOutcome:
        """Record the fate of a write or destructive step that did not run (failed before it
        was sent, denied, rejected, refused) in the ledger, so the ledger shows every step."""
        if self.ledger is not None and spec.risk is not Risk.READ and outcome.status in NOT_RUN:
            await self.ledger.settled(redacted(spec, call), spec.risk, context, outcome)
        return outcome

    async def _refusal(
        self, spec: ActionSpec, context: ActionContext, approved: bool
    ) -> ActionOutcome | None:
        """The daily action budget: a step a person approved is their explicit decision and
        runs (counted) whatever it says; any other step is refused once it is used up."""
        if self.budget is None or approved:
            return None
        reason = await self.budget.action_refusal(context)
        return refused(reason, spec) if reason is not None else None

    async def _proceed(
        self,
        spec: ActionSpec,
        call: ActionCall,
        params: Any,
        context: ActionContext,
        *,
        approved: bool,
    ) -> ActionOutcome:
        if self.ledger is None or spec.risk is Risk.READ:
            refusal = await self._refusal(spec, context, approved)
            if refusal is not None:
                return await self._settle(spec, call, context, refusal)
            return await self._execute(spec, params, context)
        return await self._execute_once(spec, call, params, context, self.ledger, approved)

    async def _execute_once(
        self,
        spec: ActionSpec,
        call: ActionCall,
        params: Any,
        context: ActionContext,
        ledger: LedgerPort,
        approved: bool,
    ) -> ActionOutcome:
        prior = await ledger.lookup(context)
        if prior is not None and prior.action == spec.name:
            if prior.outcome is not None:
                return prior.outcome  # already done: the stored result, the site untouched
            outcome = await self._after_interruption(spec, params, context)
            await ledger.outcome(context, outcome)
            return outcome
        refusal = await self._refusal(spec, context, approved)
        if refusal is not None:
            return await self._settle(spec, call, context, refusal)
        try:
            snapshot = (
                await spec.snapshot(params, context, self.services) if spec.snapshot else None
            )
        except ActionError as failure:  # e.g. the post to change does not exist
            if failure.retryable:
                raise
            return await self._settle(spec, call, context, action_failed(spec, failure))
        await ledger.intent(redacted(spec, call), spec.risk, context, snapshot)
        outcome = await self._execute_written(spec, params, context)
        await ledger.outcome(context, outcome)
        return outcome

    async def _after_interruption(
        self, spec: ActionSpec, params: Any, context: ActionContext
    ) -> ActionOutcome:
        """A step with an intent and no outcome (the worker stopped, or the run was retried
        after an answer that did not say whether the write took effect): look first."""
        try:
            found = await spec.reconcile(params, context, self.services) if spec.reconcile else None
        except ActionError as failure:
            if failure.retryable:
                raise
            # Not knowing must never become doing it twice: the step fails, once.
            return action_failed(spec, failure)
        if found is not None:
            return succeeded(spec, found)
        if spec.reconcile is None and not spec.idempotent:
            return unknown(
                f"the outcome of {spec.name} is unknown: the worker stopped while it ran. "
                "Check whether it took effect before trying again.",
                spec,
            )
        # It had not happened, or it does no harm to do again.
        return await self._execute_written(spec, params, context)

    async def _execute_written(
        self, spec: ActionSpec, params: Any, context: ActionContext
    ) -> ActionOutcome:
        """Execute a ledgered step; when the answer does not say whether the write took effect,
        the action's own check says it at once (the same check a resumed step gets)."""
        try:
            return await self._execute(spec, params, context, unknown_raises=True)
        except ActionError as failure:
            if not outcome_unknown(failure):
                raise
            try:
                found = (
                    await spec.reconcile(params, context, self.services) if spec.reconcile else None
                )
            except ActionError:
                found = None  # the check could not tell either
            if found is not None:
                secrets = secret_values(params.model_dump(), spec.secret_params())
                return scrubbed(succeeded(spec, found), secrets)
            if failure.retryable:
                raise  # the run is retried; the resumed step looks again before resending
            return unknown(
                f"{spec.name}: {failure.message}. The change may nevertheless have been made "
                "and was not found; check the site before trying again.",
                spec,
            )

    async def _confirm(
        self, spec: ActionSpec, call: ActionCall, params: Any, context: ActionContext
    ) -> ActionOutcome:
        if self.approvals is None:
            return await self._settle(
                spec,
                call,
                context,
                denied(
                    f"denied: {call.name} needs a person's approval and no approval service is "
                    "available here",
                    spec,
                ),
            )
        decided = await self.approvals.decision(context)
        if decided is None:
            refusal = secret_refusal(spec, call)
            if refusal is not None:
                return await self._settle(spec, call, context, refusal)
            approval_id = await self.approvals.request(spec, redacted(spec, call), params, context)
            return pending(spec, call, approval_id)
        if decided.status == "pending":
            return pending(spec, call, decided.approval_id)
        if decided.status != "approved":
            why = decided.note or (
                "expired without a decision" if decided.status == "expired" else "no reason given"
            )
            message = (
                f"{decided.status}: a person did not approve {call.name} ({why}). Do not try "
                "to do it another way; tell the person."
            )
            rejected = ActionOutcome(
                status=StepStatus.REJECTED,
                content=message,
                summary=message,
                risk=spec.risk,
                approval_id=decided.approval_id,
            )
            return await self._settle(spec, call, context, rejected)
        edited = decided.edited_params
        if edited is not None:
            try:  # validated when approved; a later change of the action may still refuse them
                params = spec.params.model_validate(edited)
            except ValidationError as invalid:
                message = (
                    f"the approved, edited params for {call.name} are invalid: "
                    f"{validation_message(invalid)}"
                )
                return await self._settle(spec, call, context, failed(message, spec))
            call = call.model_copy(update={"params": edited})
        outcome = await self._proceed(spec, call, params, context, approved=True)
        update: dict[str, Any] = {"approval_id": decided.approval_id}
        if edited is not None and outcome.status is StepStatus.SUCCEEDED:
            note = f"(a person approved it with edited params: {content(edited)}) "
            update["content"] = note + outcome.content
        return outcome.model_copy(update=update)

    async def _execute(
        self,
        spec: ActionSpec,
        params: Any,
        context: ActionContext,
        *,
        unknown_raises: bool = False,
    ) -> ActionOutcome:
        not_kept = secret_not_kept(spec, params)
        if not_kept is not None:
            return not_kept
        secrets = secret_values(params.model_dump(), spec.secret_params())
        try:
            result: ActionResult = await spec.handler(params, context, self.services)
        except ActionError as failure:
            if failure.retryable or (unknown_raises and outcome_unknown(failure)):
                raise
            return storable_outcome(scrubbed(action_failed(spec, failure), secrets))
        except RunFailure:
            raise
        # What the model is told and the ledger keeps never echoes a secret the site sent back,
        # and can be stored whatever the site sent.
        return storable_outcome(scrubbed(succeeded(spec, result), secrets))

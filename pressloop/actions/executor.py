"""The executor: the one pipeline every action call goes through, whoever asked for it.

validate params -> policy (allow | confirm | deny by risk and trigger) -> approval gate ->
execute -> outcome. Budgets, snapshots and the ledger join this pipeline with the WordPress pack.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from pydantic import ValidationError

from pressloop.actions.registry import ActionResult, ActionServices, ActionSpec, Registry
from pressloop.contracts import (
    ActionCall,
    ActionContext,
    ActionOutcome,
    CatalogEntry,
    PolicyMode,
    StepStatus,
)
from pressloop.errors import ActionError, RunFailure


class ApprovalGate(Protocol):
    """Creates an approval for a `confirm` call and returns its id (the run then pauses)."""

    async def request(self, spec: ActionSpec, call: ActionCall, context: ActionContext) -> str: ...


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
    ) -> None:
        self.registry = registry
        self.services = services or ActionServices()
        self.approvals = approvals

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
        mode = context.policy.mode_for(spec.risk)
        if mode is PolicyMode.DENY:
            message = (
                f"denied: the policy for {context.trigger.value} runs forbids {spec.risk.value} "
                f"actions such as {call.name}"
            )
            return ActionOutcome(
                status=StepStatus.DENIED, content=message, summary=message, risk=spec.risk
            )
        if mode is PolicyMode.CONFIRM:
            return await self._confirm(spec, call, context)
        return await self._execute(spec, params, context)

    async def _confirm(
        self, spec: ActionSpec, call: ActionCall, context: ActionContext
    ) -> ActionOutcome:
        if self.approvals is None:
            message = (
                f"denied: {call.name} needs a person's approval and no approval service is "
                "available here"
            )
            return ActionOutcome(
                status=StepStatus.DENIED, content=message, summary=message, risk=spec.risk
            )
        approval_id = await self.approvals.request(spec, call, context)
        message = f"waiting for a person to approve {call.name} (approval {approval_id})"
        return ActionOutcome(
            status=StepStatus.PENDING_APPROVAL,
            content=message,
            summary=message,
            risk=spec.risk,
            approval_id=approval_id,
        )

    async def _execute(
        self, spec: ActionSpec, params: Any, context: ActionContext
    ) -> ActionOutcome:
        try:
            result: ActionResult = await spec.handler(params, context, self.services)
        except ActionError as failure:
            if failure.retryable:
                raise
            return _failed(f"{spec.name} failed: {failure.message}", spec)
        except RunFailure:
            raise
        return ActionOutcome(
            status=StepStatus.SUCCEEDED,
            content=_content(result.content),
            summary=result.summary,
            risk=spec.risk,
            untrusted=result.untrusted,
            data=result.content,
        )


def _failed(message: str, spec: ActionSpec | None = None) -> ActionOutcome:
    return ActionOutcome(
        status=StepStatus.FAILED,
        content=f"error: {message}",
        summary=message,
        risk=spec.risk if spec else None,
        error=message,
    )

"""The outcomes the executor answers with: what the model is told, what the ledger keeps.

A failed step whose effect on the site is not known (the answer after a write was lost, cut off
or unreadable, and no check could find the change) says so in `data` (`{"unknown": true}`): the
ledger names its fate "unknown", not "failed".
"""

from __future__ import annotations

import json
from typing import Any

from pressloop.actions.registry import ActionResult, ActionSpec
from pressloop.contracts import ActionCall, ActionOutcome, StepStatus
from pressloop.errors import ActionError, SiteError

# Fates of a step that did not reach the site: the ledger records them too (`Executor._settle`).
NOT_RUN = frozenset({StepStatus.FAILED, StepStatus.DENIED, StepStatus.REJECTED, StepStatus.REFUSED})


def content(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)


def succeeded(spec: ActionSpec, result: ActionResult) -> ActionOutcome:
    return ActionOutcome(
        status=StepStatus.SUCCEEDED,
        content=content(result.content),
        summary=result.summary,
        risk=spec.risk,
        untrusted=result.untrusted or spec.untrusted_output,
        data=result.content,
    )


def denied(message: str, spec: ActionSpec) -> ActionOutcome:
    return ActionOutcome(status=StepStatus.DENIED, content=message, summary=message, risk=spec.risk)


def refused(reason: str, spec: ActionSpec) -> ActionOutcome:
    """A daily budget is used up: the model is told, so it can tell the person."""
    message = (
        f"refused: budget: {spec.name} did not run because {reason}. Tell the person; no more "
        "actions can run until then unless a person approves one."
    )
    return ActionOutcome(
        status=StepStatus.REFUSED, content=message, summary=message, risk=spec.risk
    )


def pending(spec: ActionSpec, call: ActionCall, approval_id: str) -> ActionOutcome:
    message = f"waiting for a person to approve {call.name} (approval {approval_id})"
    return ActionOutcome(
        status=StepStatus.PENDING_APPROVAL,
        content=message,
        summary=message,
        risk=spec.risk,
        approval_id=approval_id,
    )


def failed(message: str, spec: ActionSpec | None = None, data: Any = None) -> ActionOutcome:
    return ActionOutcome(
        status=StepStatus.FAILED,
        content=f"error: {message}",
        summary=message,
        risk=spec.risk if spec else None,
        error=message,
        data=data,
    )


def unknown(message: str, spec: ActionSpec) -> ActionOutcome:
    """A failed step that may nevertheless have changed the site."""
    return failed(message, spec, data={"unknown": True})


def is_unknown(outcome: ActionOutcome) -> bool:
    return isinstance(outcome.data, dict) and outcome.data.get("unknown") is True


def site_answer(failure: BaseException) -> SiteError | None:
    """The site's error answer behind a failure, also when an action re-raised it with a
    clearer message (`raise ActionError("there is no post 9") from answer`)."""
    current: BaseException | None = failure
    for _depth in range(8):  # a cause chain is short; never loop on a cycle
        if current is None or isinstance(current, SiteError):
            return current
        current = current.__cause__
    return None


def outcome_unknown(failure: BaseException) -> bool:
    """The failure, or one behind it, says a write was sent and its effect is not known."""
    current: BaseException | None = failure
    for _depth in range(8):
        if current is None:
            return False
        if isinstance(current, ActionError) and current.outcome_unknown:
            return True
        current = current.__cause__
    return False


def action_failed(spec: ActionSpec, failure: ActionError) -> ActionOutcome:
    """A failed step whose message, and `data.error` in the ledger, carry the site's HTTP
    status and error code when the site answered with one (404 rest_post_invalid_id)."""
    message = f"{spec.name} failed: {failure.message}"
    answer = site_answer(failure)
    if answer is None:
        return failed(message, spec)
    said = f"{answer.status} {answer.site_code}" if answer.site_code else str(answer.status)
    if said not in message:
        message += f" (the site answered {said})"
    error = {"status": answer.status, "code": answer.site_code}
    return failed(message, spec, data={"error": error})

"""Pressloop's own words in a thread: why a run ended without doing what was asked.

A run that ends failed, timed out, dead or cancelled leaves one short assistant message named
`pressloop` in its thread: what happened, in plain words, and what the person can do next. It is
written here from the run's error and steps, never by the model, and shown by the UI and the CLI
as Pressloop's (the run's `run.finished` event carries it as `notice`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pressloop.contracts import ErrorInfo, Message, Role, RunStatus, Step, StepStatus

PRESSLOOP = "pressloop"  # the `name` of the messages Pressloop writes itself
DETAIL_CHARS = 160

_HTTP_STATUS = re.compile(r"\banswered (\d{3})\b")
_CONFIGURATION = frozenset({"ConfigurationError", "ProviderNotConfigured"})
_PROVIDER = frozenset({"ProviderError", "ScriptExhausted"})


def notice_message(text: str) -> Message:
    return Message(role=Role.ASSISTANT, name=PRESSLOOP, content=text)


def ended_notice(
    status: RunStatus, error: ErrorInfo | None, steps: Sequence[Step], *, attempts: int
) -> str | None:
    """The notice of a run that ended in `status`; None when it did what was asked."""
    if status is RunStatus.CANCELLED:
        return cancelled_notice(steps)
    if status not in (RunStatus.FAILED, RunStatus.TIMED_OUT, RunStatus.DEAD):
        return None
    what, advice = explain(error)
    if status is RunStatus.DEAD:
        tries = "after 1 attempt" if attempts == 1 else f"after {attempts} attempts"
        return f"{what} {tries}; {advice}, then requeue this run."
    return f"{what}; {advice}."


def cancelled_notice(
    steps: Sequence[Step], *, before: RunStatus | None = None, error: ErrorInfo | None = None
) -> str:
    """A cancelled run's notice; `before`: the state it was cancelled in, when not running."""
    done = [s.action for s in steps if s.status is StepStatus.SUCCEEDED]
    ran = f"Done before it stopped: {', '.join(done)}." if done else "No action had run."
    if before is RunStatus.QUEUED and error is not None:  # it waited for a retry
        what = explain(error)[0]
        return (
            f"This run was cancelled instead of being retried: {_lower(what)}. {ran} Send the "
            "message again to try once more."
        )
    if before is RunStatus.QUEUED:
        return "This run was cancelled before it started; nothing was done."
    if before is RunStatus.WAITING_APPROVAL:
        return f"This run was cancelled while a step waited for approval; it did not run. {ran}"
    return f"This run was cancelled and stopped. {ran}"


def explain(error: ErrorInfo | None) -> tuple[str, str]:
    """(what happened, what to do) for a run's error, in a person's words."""
    if error is None:
        return "The run stopped without an error", "look at the run's events"
    message = error.message
    if "WordPress" in message and error.cls in ("SiteError", "ActionError"):
        return _site(message), "check the site"
    if error.cls in _PROVIDER:
        return _provider(message)
    if error.cls == "InvalidModelOutput":
        problem = _lower(_clip(message.split(": ", 1)[-1].split(". ")[0]))
        return (
            f"The model's answer could not be used ({problem}), also after a corrective retry",
            "send the message again, or use a model that follows the decision format",
        )
    simple = {
        "AgentDisabled": (
            "The agent is switched off (the kill switch)",
            "switch it back on in Settings, or unset PRESSLOOP_DISABLE_AGENT",
        ),
        "LeaseExpired": (
            "The worker running this run stopped on every attempt",
            "check the workers' logs",
        ),
    }
    if error.cls in simple:
        return simple[error.cls]
    detail = _clip(message)
    if error.cls == "LimitExceeded":
        return f"The run stopped at a limit: {detail}", "ask for less at once, or raise the limit"
    if error.cls == "BudgetExceeded":
        return f"A daily budget is used up: {detail}", "wait for tomorrow, or raise the budget"
    if error.cls in _CONFIGURATION:
        return f"Pressloop is not set up to run this: {detail}", "fix it (`pressloop doctor`)"
    return f"The run failed ({error.cls}: {detail})", "check the server's log"


def _site(message: str) -> str:
    if "did not answer within" in message:
        return "The site did not answer in time"
    if "could not reach" in message:
        return "The site could not be reached"
    status = _HTTP_STATUS.search(message)
    return f"The site did not answer (HTTP {status[1]})" if status else "The site failed"


def _provider(message: str) -> tuple[str, str]:
    if "did not answer in time" in message:
        return "The model provider did not answer in time", "check the provider"
    if "could not reach" in message:
        return "The model provider could not be reached", "check the provider's address"
    status = _HTTP_STATUS.search(message)
    if status is None:
        return f"The model provider failed ({_clip(message)})", "check the provider"
    code = int(status[1])
    if code in (401, 403):
        return f"The model provider refused the key (HTTP {code})", "check the provider's key"
    if code == 429:
        return "The model provider is limiting requests (HTTP 429)", "wait a little"
    return f"The model provider did not answer (HTTP {code})", "check the provider"


def _clip(text: str) -> str:
    text = " ".join(text.split()).rstrip(".")
    return text if len(text) <= DETAIL_CHARS else text[: DETAIL_CHARS - 1] + "…"


def _lower(text: str) -> str:
    return text[:1].lower() + text[1:]

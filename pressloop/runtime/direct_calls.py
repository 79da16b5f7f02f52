"""A direct call: an MCP client (or another caller) runs one action, without the model.

The call becomes a run like any other, so it gets everything a model's call gets: the
trigger's policy, an approval that pauses the run and resumes it, budgets, the ledger, events
and undo. Its checkpoint starts where a model's answer would have left it, one call waiting
(`Checkpoint.direct`: the engine runs the waiting call and ends with its result).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from pressloop.actions.registry import ActionSpec
from pressloop.contracts import ActionCall, Checkpoint, Message, Role, Trigger
from pressloop.errors import InvalidRequest
from pressloop.redaction import secret_values

# What the opening message shows of the params (the run list and the thread show it).
SHOWN_PARAMS_CHARS = 2000


@dataclass(kw_only=True, frozen=True)
class DirectStart:
    title: str
    message: str
    checkpoint: Checkpoint


def direct_call(
    spec: ActionSpec, params: Any, *, user: str | None, trigger: Trigger
) -> DirectStart:
    """The run's opening for one call of `spec`. Params are checked when the step runs (the
    executor validates them, so a bad call is a failed step with the reason); a secret param
    is refused here: the run's checkpoint is stored, and secrets never are."""
    if not isinstance(params, dict):
        raise InvalidRequest(f"the params of {spec.name} must be a JSON object")
    secret = [name for name in spec.secret_params() if secret_values(params, [name])]
    if secret:
        raise InvalidRequest(
            f"{spec.name} takes a secret ({', '.join(secret)}), which a direct call would store "
            "with its run; leave it out (the action makes one where it can) or ask in a chat"
        )
    shown = json.dumps(params, ensure_ascii=False, sort_keys=True)
    if len(shown) > SHOWN_PARAMS_CHARS:
        shown = shown[:SHOWN_PARAMS_CHARS] + "…"
    message = f"{user or 'someone'} called {spec.name} directly ({trigger.value}): {shown}"
    call = ActionCall(id=f"direct-{uuid.uuid4().hex[:12]}", name=spec.name, params=params)
    checkpoint = Checkpoint(
        messages=[
            Message(role=Role.USER, content=message),
            Message(role=Role.ASSISTANT, content="", tool_calls=[call]),
        ],
        direct=True,
    )
    return DirectStart(
        title=f"{spec.name} ({trigger.value})", message=message, checkpoint=checkpoint
    )

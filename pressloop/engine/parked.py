"""What a turn parked for approval answers: Pressloop's statement, written from its steps.

A model that asks for a change often says it is done ("Tagline updated.") in the same answer;
while the step waits for a person, nothing has happened. So the answer of a parked turn is not
the model's: it names the step that waits, what ran before it and what will run after it, and
where to decide. The model's words stay in the transcript and on the approval (its reason).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from pressloop.contracts import ActionCall, Step, StepStatus

PARAMS_CHARS = 200


def _call(action: str, params: dict[str, object]) -> str:
    text = json.dumps(params, ensure_ascii=False, default=str)
    if len(text) > PARAMS_CHARS:
        text = text[: PARAMS_CHARS - 1] + "…"
    return f"{action} {text}"


def parked_answer(steps: Sequence[Step], waiting: Sequence[ActionCall]) -> str:
    """`steps`: the turn's steps, the last one waiting for approval; `waiting`: the calls of
    the same plan that run after it once it is decided."""
    pending = steps[-1]
    assert pending.status is StepStatus.PENDING_APPROVAL
    lines = [
        f"{_call(pending.action, pending.params)} needs your approval before it runs; it has "
        "not changed anything yet."
    ]
    done = [s.action for s in steps if s.status is StepStatus.SUCCEEDED]
    if done:
        lines.append(f"Done so far: {', '.join(done)}.")
    if waiting:
        lines.append(f"After it: {', '.join(c.name for c in waiting)}.")
    where = f" (approval {pending.approval_id})" if pending.approval_id else ""
    lines.append(f"Approve or reject it in Approvals{where}.")
    return " ".join(lines)

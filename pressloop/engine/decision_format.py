"""The JSON decision format, written once (DESIGN.md section 3).

The system prompt's DECISION_FORMAT section and the corrective message a model gets after an
unusable answer are both built from `DECISION_FORMAT`, so a model is never told two different
formats; `decision_parser.decision_schema` is the same format as a JSON schema (all four fields,
in this order) for schema-constrained decoding.
"""

from __future__ import annotations

from pressloop.contracts import DecisionProtocol
from pressloop.engine.decision_parser import MAX_ACTIONS, THOUGHT_MAX

DECISION_FORMAT = f"""Answer with exactly one JSON object and nothing else:
{{"thought": "<why, at most {THOUGHT_MAX} chars>", \
"actions": [{{"action": "<name>", "params": {{...}}}}], \
"reply": "<text for the person>", "confidence": <0..1>}}
- "actions" holds at most {MAX_ACTIONS} actions, run in order; a failed action stops the rest.
- When you are done (or need nothing), answer with "actions": [] and your reply.
- After actions run you receive ACTION_RESULTS and decide again."""

DECISION_FORMAT_SECTION = "## DECISION_FORMAT\n" + DECISION_FORMAT

_NATIVE_FORMAT = "Answer again: call one of the tools, or reply to the person with text."


def correction(problem: str, protocol: DecisionProtocol) -> str:
    """What the model is told after an unusable answer: the problem, then the format."""
    expected = (
        f"Answer again in DECISION_FORMAT.\n{DECISION_FORMAT}"
        if protocol is DecisionProtocol.JSON
        else _NATIVE_FORMAT
    )
    return f"Your last answer could not be used: {problem.rstrip('.')}.\n{expected}"

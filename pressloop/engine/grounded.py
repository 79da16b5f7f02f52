"""Answers that say only what the run's steps show.

Two rules, both about the final answer of a turn:

- Answering from results (`EngineDeps.answer_from_results`, on for the local model): when every
  action of a round changed the site as asked (each a write that succeeded), the turn ends with
  Pressloop's own account of those steps instead of another model call. A 1.5B model on 2 cores
  spends 6-12 s writing "Done!" after the results, and sometimes writes it after a failure; the
  step summaries say what happened, exactly. A round that read something still goes back to the
  model: the person asked a question, or the model needs what it read to act. So does a round
  that left part of the request undone (`left_undone`: "rename it and publish it", renamed
  only): the model sees the results and does the rest.
- Naming what was read (`answer_from_results` too): an answer to a question that names none
  of the things the turn's reads listed ("Two media items in the library.", plugins by their
  folders) gets them named after it, from the results.
- Checking claims (every provider): a final answer that claims a change ("published", "I have
  approved ...") while the turn changed nothing and an action that would have failed, gets
  Pressloop's note of what failed. The model's words stay; the person is not misled by them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from pressloop.contracts import Message, Risk, Role, Step, StepStatus

# Words of a reply that says a change happened.
_CLAIM = re.compile(
    r"\b(published|created|added|updated|changed|renamed|deleted|removed|trashed|moved|"
    r"approved|replied|activated|deactivated|installed|uploaded|set|made|marked|tagged|filed|"
    r"assigned|saved|done|sent|emailed|notified|is now|are now)\b",
    re.IGNORECASE,
)
# Words of a reply that already says it did not happen.
_ADMITS = re.compile(
    r"\b(not|n't|cannot|couldn't|could not|failed|unable|no such|does not exist|"
    r"doesn't exist|error|sorry|which one)\b",
    re.IGNORECASE,
)
_WRITES = frozenset({Risk.WRITE, Risk.DESTRUCTIVE})
# Changes a request names, and the mark a step that made one leaves in its action's name, its
# params or its result summary. Only verbs whose mark cannot be missed are listed; any other
# request is taken as done by the writes that succeeded.
_ASKED: tuple[tuple[str, re.Pattern[str], re.Pattern[str]], ...] = (
    ("publish", re.compile(r"\bpublish(es|ed|ing)?\b|\bgo live\b"), re.compile(r"(?<!un)publish")),
    ("rename", re.compile(r"\b(re-?name|re-?title)[sd]?\b"), re.compile(r"title|renam|\bname\b")),
    ("approve", re.compile(r"\bapprove[sd]?\b"), re.compile(r"approv")),
    ("reply", re.compile(r"\b(reply|replies|respond)\b"), re.compile(r"repl")),
    ("trash", re.compile(r"\b(trash|delete|remove)\b"), re.compile(r"trash|delet|remov")),
)


def wrote_everything(steps: Sequence[Step]) -> bool:
    """Whether these steps (one round's) are all writes that succeeded."""
    return bool(steps) and all(
        s.status is StepStatus.SUCCEEDED and s.risk in _WRITES for s in steps
    )


def left_undone(request: str | None, steps: Sequence[Step]) -> list[str]:
    """The changes `request` (the person's words) names that no succeeded write of `steps`
    shows: "Rename the draft X to Y and publish it" after a rename alone gives ["publish"]."""
    if not request:
        return []
    asked = request.casefold()
    marks = " ".join(
        f"{s.action} {s.result_summary} {json.dumps(s.params, ensure_ascii=False)}".casefold()
        for s in steps
        if s.status is StepStatus.SUCCEEDED and s.risk in _WRITES
    )
    return [verb for verb, named, mark in _ASKED if named.search(asked) and not mark.search(marks)]


def account(steps: Sequence[Step]) -> str:
    """Pressloop's answer for a turn of successful writes: what each write step did."""
    lines = [
        _sentence(s.result_summary or f"{s.action} succeeded") for s in steps if s.risk in _WRITES
    ]
    if len(lines) == 1:
        return f"Done: {lines[0]}"
    return "Done:\n" + "\n".join(f"- {line}" for line in lines)


def unbacked_claim(reply: str, steps: Sequence[Step]) -> str | None:
    """Pressloop's note for a reply that claims a change the turn's steps do not show: no write
    succeeded and at least one failed (or was skipped, denied, rejected, refused). None when the
    reply is backed, or says itself that it failed."""
    if not _CLAIM.search(reply) or _ADMITS.search(reply):
        return None
    if any(s.status is StepStatus.SUCCEEDED and s.risk in _WRITES for s in steps):
        return None
    failed = [s for s in steps if s.status not in (StepStatus.SUCCEEDED,)]
    if not failed:
        return None
    reasons = "; ".join(
        f"{s.action} {s.status.value}: {(s.error or s.result_summary)[:200]}" for s in failed
    )
    return f"Pressloop: nothing was changed on the site in this turn ({reasons})."


# A listing longer than this is not repeated after an answer: the answer picked from it.
MAX_NAMED = 20


def unnamed_listing(reply: str, steps: Sequence[Step], messages: Sequence[Message]) -> str | None:
    """Pressloop's line naming what the turn's reads listed, for an answer that names none of
    it; None when the turn changed something, read no listing, or the answer names an item."""
    if not steps or any(s.status is not StepStatus.SUCCEEDED or s.risk in _WRITES for s in steps):
        return None
    read = {s.call_id for s in steps}
    names: dict[str, None] = {}
    for message in messages:
        if message.role is Role.TOOL and message.tool_call_id in read:
            for name in _listed_names(message.content):
                names.setdefault(name, None)
    if not names or len(names) > MAX_NAMED:
        return None
    said = reply.casefold()
    if any(name.casefold() in said for name in names):
        return None
    return "From the results: " + ", ".join(names) + "."


def _listed_names(content: str) -> list[str]:
    """The names (or titles) of the objects in the lists of a JSON result."""
    start = min((i for i in (content.find("{"), content.find("[")) if i >= 0), default=-1)
    if start < 0:
        return []
    try:
        value = json.loads(content[start:])
    except ValueError:
        return []
    found: list[str] = []

    def walk(node: object, depth: int) -> None:
        if depth > 3:
            return
        if isinstance(node, dict):
            for child in node.values():
                walk(child, depth + 1)
        elif isinstance(node, list):
            for item in node:
                if isinstance(item, dict):
                    name = item.get("name") or item.get("title")
                    if isinstance(name, str) and name.strip():
                        found.append(" ".join(name.split()))
                        continue
                walk(item, depth + 1)

    walk(value, 0)
    return found


def _sentence(text: str) -> str:
    text = " ".join(text.split())
    if not text:
        return text
    text = text[0].upper() + text[1:]
    return text if text.endswith((".", "!", "?", ")")) else text + "."

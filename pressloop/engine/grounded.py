"""Answers that say only what the run's steps show.

Two rules, both about the final answer of a turn:

- Answering from results (`EngineDeps.answer_from_results`, on for the local model): when every
  action of a round changed the site as asked (each a write that succeeded), the turn ends with
  Pressloop's own account of those steps instead of another model call. A 1.5B model on 2 cores
  spends 6-12 s writing "Done!" after the results, and sometimes writes it after a failure; the
  step summaries say what happened, exactly. A round that read something still goes back to the
  model: the person asked a question, or the model needs what it read to act.
- Checking claims (every provider): a final answer that claims a change ("published", "I have
  approved ...") while the turn changed nothing and an action that would have failed, gets
  Pressloop's note of what failed. The model's words stay; the person is not misled by them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pressloop.contracts import Risk, Step, StepStatus

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


def wrote_everything(steps: Sequence[Step]) -> bool:
    """Whether these steps (one round's) are all writes that succeeded."""
    return bool(steps) and all(
        s.status is StepStatus.SUCCEEDED and s.risk in _WRITES for s in steps
    )


def account(steps: Sequence[Step]) -> str:
    """Pressloop's answer for a round of successful writes: what each step did."""
    lines = [_sentence(s.result_summary or f"{s.action} succeeded") for s in steps]
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


def _sentence(text: str) -> str:
    text = " ".join(text.split())
    if not text:
        return text
    text = text[0].upper() + text[1:]
    return text if text.endswith((".", "!", "?", ")")) else text + "."

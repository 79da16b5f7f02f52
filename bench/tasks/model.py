"""What a benchmark task is, what its judge sees, and what one run of it gave."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from bench.tasks.seed import Seed
from bench.tasks.state import Change, State
from pressloop.contracts import Step
from pressloop.store.approvals import ApprovalRecord

# What a right answer to the request is:
# effect: the site changes as asked; answer: a question answered from the site's facts;
# approval: the right destructive step waits for a person (and nothing changes yet);
# refusal: nothing can do it, so the agent says so and changes nothing.
Kind = Literal["effect", "answer", "approval", "refusal"]

CAUSES = (
    "wrong action",
    "wrong params",
    "made-up id",
    "claimed an effect that did not happen",
    "wrong answer",
    "refused wrongly",
    "timeout",
    "error",
)

Facts = dict[str, Any]
Script = list[dict[str, Any]]


@dataclass(kw_only=True)
class World:
    """What a judge reads: the seeded facts, the site before and after, the agent's answer."""

    facts: Facts
    before: State
    after: State
    changes: list[Change]
    answer: str
    steps: list[Step]
    pending: ApprovalRecord | None = None  # the approval left pending (kind "approval")

    def called(self, *actions: str) -> list[Step]:
        return [s for s in self.steps if s.action in actions]


def _nothing(_change: Change, _world: World) -> bool:
    return False


def _no_script(_facts: Facts) -> Script:
    return [{"text": "I cannot do that."}]


@dataclass(frozen=True, kw_only=True)
class Task:
    name: str
    area: str
    request: str
    summary: str  # one line for the task list
    kind: Kind
    setup: Callable[[Seed], Awaitable[Facts]]
    # None when the request was done as asked; else what is missing or wrong.
    check: Callable[[World], str | None]
    # The changes the request asks for; any other change on the site is a wrong effect.
    allowed: Callable[[Change, World], bool] = _nothing
    # The actions a right answer uses (for sorting a failure by cause).
    expects: frozenset[str] = frozenset()
    # The actions the site owner approves when the agent asks (what they asked for).
    approves: frozenset[str] = frozenset()
    # The scripted provider's answers that do the task right (the harness's self-test).
    oracle: Callable[[Facts], Script] = _no_script


@dataclass(kw_only=True)
class Result:
    task: Task
    passed: bool
    cause: str | None
    wrong_effect: bool
    seconds: float
    model_calls: int
    status: str
    detail: str = ""
    answer: str = ""
    actions: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)  # the wrong effects, described
    # Each step as `action(params) -> status: result`, for reading a failure.
    trace: list[str] = field(default_factory=list)


_REFUSAL = re.compile(
    r"\b(can ?not|can't|cannot|unable|not able|sorry|won't|do not have|don't have|not possible|"
    r"isn't possible|not allowed|couldn't|could not|failed|no way to|not supported|"
    r"not available|doesn't (?:allow|support)|does not (?:allow|support)|which (?:one|post|"
    r"comment|user|page)|please (?:confirm|specify|clarify)|do you (?:want|mean))\b",
    re.IGNORECASE,
)


def refuses(text: str) -> bool:
    """Whether the answer says it did not (or could not) do it, or asks back."""
    return bool(_REFUSAL.search(text)) or text.rstrip().endswith("?")


def mentions(text: str, *words: str) -> list[str]:
    """The words (case-insensitive) missing from the text."""
    low = text.lower()
    return [w for w in words if w.lower() not in low]

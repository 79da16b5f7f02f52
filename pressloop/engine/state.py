"""The loop's steps (a tagged union) and the mutable state of one turn."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pressloop.contracts import (
    Checkpoint,
    ErrorInfo,
    NextAction,
    TurnRequest,
    TurnResult,
    TurnStatus,
)
from pressloop.engine.ports import EngineDeps
from pressloop.engine.taint import untrusted_sources


@dataclass(kw_only=True, frozen=True)
class CallModel:
    """Ask the model what to do next."""


@dataclass(kw_only=True, frozen=True)
class RunActions:
    """Run the unanswered calls of the model's last answer, in order."""


@dataclass(kw_only=True, frozen=True)
class Finish:
    status: TurnStatus
    error: ErrorInfo | None = None
    next_action: NextAction = NextAction.STOP
    # The turn's answer when Pressloop, not the model, has the last word (a parked turn).
    assistant_text: str | None = None


LoopStep = CallModel | RunActions | Finish


@dataclass(kw_only=True)
class TurnState:
    request: TurnRequest
    deps: EngineDeps
    checkpoint: Checkpoint
    started_at: float
    elapsed_before: float = 0.0
    # Secret params of this turn's calls (call id -> name -> value): only here, in memory, until
    # the step that uses them has run; the checkpoint and events hold the redaction mark.
    secrets: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Steps that asked a person before this turn was resumed: their decision answers them.
    asked: frozenset[int] = frozenset()
    # An action failed on the run's last attempt: the model explains once more, then the turn
    # ends with this error (`model_step._explain`).
    ending: ErrorInfo | None = None

    def elapsed(self) -> float:
        return self.elapsed_before + (self.deps.monotonic() - self.started_at)

    def remaining(self) -> float:
        return self.request.policy.wall_time_s - self.elapsed()

    def result(self, finish: Finish) -> TurnResult:
        cp = self.checkpoint
        return TurnResult(
            status=finish.status,
            assistant_text=cp.assistant_text
            if finish.assistant_text is None
            else finish.assistant_text,
            steps=list(cp.steps),
            usage=cp.usage,
            provider=self.deps.provider.name,
            model=self.deps.provider.model,
            error=finish.error,
            next_action=finish.next_action,
            untrusted=bool(untrusted_sources(self.deps, cp)),
        )

    async def save(self) -> None:
        self.checkpoint.elapsed_s = self.elapsed()
        await self.deps.save_checkpoint(self.checkpoint)

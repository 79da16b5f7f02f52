"""What one attempt's engine is given (`EngineDeps`): the provider and the actions wrapped in
the runtime's checks and measures (budgets, metrics, spans, the ledger, approvals), the prompt's
context, the session's writes, and the process's pacing (and a model's streams read as urgent
work, on `pressloop serve`'s loop). The runner builds one per attempt."""

from __future__ import annotations

from dataclasses import dataclass

from opentelemetry.trace import Tracer

from pressloop.actions.executor import Executor
from pressloop.actions.registry import ActionServices, Registry
from pressloop.clock import Monotonic
from pressloop.config import Settings
from pressloop.contracts import DecisionProtocol
from pressloop.engine.ports import EngineDeps, PromptContext, no_pace
from pressloop.engine.prompt import memory_section
from pressloop.observability import tracing
from pressloop.observability.metrics import Metrics
from pressloop.providers.base import Provider
from pressloop.runtime.approvals import SessionApprovals
from pressloop.runtime.budget_gate import Counting, RunBudget
from pressloop.runtime.context import RunContext
from pressloop.runtime.ledger import SessionLedger
from pressloop.runtime.observed import ObservedActions, ObservedProvider, TurnSpans
from pressloop.runtime.pacing import Pacer
from pressloop.runtime.session import RunSession
from pressloop.runtime.stream_relays import RelayedStreams, StreamRelays
from pressloop.runtime.stream_urgency import UrgentStreams
from pressloop.store.records import RunRecord


@dataclass(frozen=True, kw_only=True)
class TurnDeps:
    """The process's parts an attempt's engine is built from."""

    counting: Counting  # where the budgets count (the runner)
    settings: Settings
    registry: Registry
    services: ActionServices
    metrics: Metrics
    monotonic: Monotonic
    tracer: Tracer | None
    pacer: Pacer | None
    relays: StreamRelays

    def build(
        self, run: RunRecord, context: RunContext, provider: Provider, session: RunSession
    ) -> EngineDeps:
        agent = context.agent
        protocol_setting = self.settings.decision_protocol
        memories, untrusted_memories = memory_section(context.memories)
        spans = self._spans()
        return EngineDeps(
            # Tokens, each call; the budget's check is outside the call's measured time.
            provider=RunBudget(counting=self.counting, run=run).guarded(
                ObservedProvider(
                    UrgentStreams(self._relayed(provider, run, session), session.hurry),
                    self.metrics,
                    self.monotonic,
                    spans,
                )
            ),
            actions=ObservedActions(self._executor(run, session), self.metrics, spans),
            history=context.history,
            prompt=PromptContext(
                instructions=agent.instructions if agent else "",
                agent_files=agent.files if agent else {},
                memory_context=memories,
                untrusted_memories=untrusted_memories,
            ),
            protocol=None if protocol_setting == "auto" else DecisionProtocol(protocol_setting),
            emit=session.emit,
            save_checkpoint=session.save_checkpoint,
            cancel_requested=lambda: session.cancel_requested,
            disabled=context.disabled,
            retries_left=run.attempt < run.max_attempts,
            max_output_tokens=self.settings.max_output_tokens,
            answer_from_results=self._answers_from_results(provider),
            pace=self.pacer.turn if self.pacer is not None else no_pace,
        )

    def _relayed(self, provider: Provider, run: RunRecord, session: RunSession) -> Provider:
        """Through the stream process while a person streams the run there."""
        if not self.relays.enabled:
            return provider
        return RelayedStreams(provider, self.relays, run.id, session.text_position)

    def _answers_from_results(self, provider: Provider) -> bool:
        setting = self.settings.answer_from_results
        if setting == "auto":
            return bool(getattr(provider, "answers_from_results", False))
        return setting == "on"

    def _spans(self) -> TurnSpans | None:
        if self.tracer is None:
            return None

        def secret_params(name: str) -> list[str]:
            spec = self.registry.get(name)
            return spec.secret_params() if spec is not None else []

        return TurnSpans(
            tracer=self.tracer,
            capture_content=tracing.capturing_content(),
            secret_params=secret_params,
        )

    def _executor(self, run: RunRecord, session: RunSession) -> Executor:
        return Executor(
            self.registry,
            self.services,
            ledger=SessionLedger(session),
            approvals=SessionApprovals(session, self.services, self.settings.approval_expiry_s),
            budget=RunBudget(counting=self.counting, run=run),  # actions, each call
        )

"""Where the runtime tells its `Metrics` what happened (pressloop/observability/metrics.py):
a model call (`ObservedProvider`), an action call (`ObservedActions`), runs reclaimed after
their lease expired (`count_reclaimed`), and what `/metrics` reads from the database at scrape
time (`read_database`). The run's own start and rest are told by the runner.

The same seams make the spans when tracing is on (pressloop/observability/tracing.py): one per
model call (`chat {model}`, GenAI semantic conventions) and one per action (`execute_tool
{name}`), under the span of the run's attempt (`RunSpan`, `invoke_agent {agent}`). Off (no
tracer), nothing here starts a span or reads a clock more than the metrics do.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, Span, SpanContext, SpanKind, Status, StatusCode, Tracer

from pressloop.clock import Monotonic, Now
from pressloop.config import Settings
from pressloop.contracts import (
    ActionCall,
    ActionContext,
    ActionOutcome,
    CatalogEntry,
    Message,
    Role,
    StepStatus,
    Usage,
)
from pressloop.engine.ports import ActionPort
from pressloop.observability.metrics import (
    MODEL_BUCKETS,
    RUN_BUCKETS,
    DatabaseReading,
    Metrics,
    parse_buckets,
)
from pressloop.observability.tracing import carrier_of, context_of
from pressloop.providers.base import (
    ModelRequest,
    ModelResponse,
    Provider,
    ResponseDone,
    StreamPart,
    WrappedProvider,
)
from pressloop.redaction import SECRET, redact, scrub_data, secret_values
from pressloop.store import claims as claim_store
from pressloop.store import metrics_reads
from pressloop.store.db import Database
from pressloop.store.records import RunRecord


@dataclass(kw_only=True)
class TurnSpans:
    """What the spans of one turn share: the tracer, whether model spans carry the messages,
    which params are secret (never in a span), and the model call that asked for the actions
    (each action's span links to it)."""

    tracer: Tracer
    capture_content: bool = False
    secret_params: Callable[[str], list[str]] = lambda _name: []
    last_model_call: SpanContext | None = None


class ObservedProvider(WrappedProvider):
    """Each model call's latency, outcome and tokens, by provider and model (and its span)."""

    def __init__(
        self,
        inner: Provider,
        metrics: Metrics,
        monotonic: Monotonic = time.monotonic,
        spans: TurnSpans | None = None,
    ) -> None:
        super().__init__(inner)
        self.metrics = metrics
        self.monotonic = monotonic
        self.spans = spans

    def _told(self, started: float, outcome: str, usage: Usage | None = None) -> None:
        self.metrics.model_call(
            self.inner.name,
            self.inner.model,
            self.monotonic() - started,
            outcome=outcome,
            input_tokens=usage.input_tokens if usage else 0,
            output_tokens=usage.output_tokens if usage else 0,
        )

    def _span(self, request: ModelRequest) -> Span | None:
        """The model call's span (not made current: nothing runs under it)."""
        if self.spans is None:
            return None
        span = self.spans.tracer.start_span(
            f"chat {self.inner.model}",
            kind=SpanKind.CLIENT,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": self.inner.name,
                "gen_ai.system": self.inner.name,
                "gen_ai.request.model": self.inner.model,
            },
        )
        if request.max_output_tokens is not None:
            span.set_attribute("gen_ai.request.max_tokens", request.max_output_tokens)
        if self.spans.capture_content:
            _request_content(span, request, self.spans.secret_params)
        self.spans.last_model_call = span.get_span_context()
        return span

    def _ended(
        self,
        span: Span | None,
        outcome: str,
        response: ModelResponse | None = None,
        error: BaseException | None = None,
    ) -> None:
        if span is None or self.spans is None:
            return
        span.set_attribute("pressloop.outcome", outcome)
        if response is not None:
            span.set_attribute("gen_ai.response.model", response.model or self.inner.model)
            span.set_attribute("gen_ai.usage.input_tokens", response.usage.input_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", response.usage.output_tokens)
            if response.finish_reason:
                span.set_attribute("gen_ai.response.finish_reasons", [response.finish_reason])
            if self.spans.capture_content:
                _response_content(span, response, self.spans.secret_params)
        if error is not None:
            span.set_attribute("error.type", type(error).__name__)
            span.set_status(Status(StatusCode.ERROR, type(error).__name__))
        span.end()

    async def complete(self, request: ModelRequest) -> ModelResponse:
        started = self.monotonic()
        span = self._span(request)
        try:
            response = await self.inner.complete(request)
        except asyncio.CancelledError as stop:
            self._told(started, "cancelled")
            self._ended(span, "cancelled", error=stop)
            raise
        except Exception as exc:
            self._told(started, "error")
            self._ended(span, "error", error=exc)
            raise
        self._told(started, "ok", response.usage)
        self._ended(span, "ok", response)
        return response

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        started = self.monotonic()
        span = self._span(request)
        usage: Usage | None = None
        response: ModelResponse | None = None
        error: BaseException | None = None
        outcome = "cancelled"  # the reader stopped before the answer was done
        try:
            async for part in self.inner.stream(request):
                if isinstance(part, ResponseDone):
                    usage, outcome, response = part.response.usage, "ok", part.response
                yield part
        except asyncio.CancelledError as stop:
            outcome, error = "cancelled", stop
            raise
        except Exception as exc:
            outcome, error = "error", exc
            raise
        finally:
            self._told(started, outcome, usage)
            self._ended(span, outcome, response, error)


class ObservedActions:
    """Each action call's outcome (the step's status), by action (and its span, the parent of
    what the action does: its WordPress requests)."""

    def __init__(self, inner: ActionPort, metrics: Metrics, spans: TurnSpans | None = None) -> None:
        self.inner = inner
        self.metrics = metrics
        self.spans = spans

    def catalog(self) -> list[CatalogEntry]:
        return self.inner.catalog()

    async def run(self, call: ActionCall, context: ActionContext) -> ActionOutcome:
        if self.spans is not None:
            return await self._traced(self.spans, call, context)
        try:
            outcome = await self.inner.run(call, context)
        except asyncio.CancelledError:
            self.metrics.action_call(call.name, "cancelled")
            raise
        except Exception:
            self.metrics.action_call(call.name, "error")
            raise
        self.metrics.action_call(call.name, outcome.status.value)
        return outcome

    async def _traced(
        self, spans: TurnSpans, call: ActionCall, context: ActionContext
    ) -> ActionOutcome:
        asked_by = spans.last_model_call
        with spans.tracer.start_as_current_span(
            f"execute_tool {call.name}",
            kind=SpanKind.INTERNAL,
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": call.name,
                "gen_ai.tool.call.id": call.id,
                "gen_ai.tool.type": "function",
                "pressloop.action.step": context.step_index,
            },
            links=[Link(asked_by)] if asked_by is not None else None,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                outcome = await self.inner.run(call, context)
            except asyncio.CancelledError:
                self.metrics.action_call(call.name, "cancelled")
                span.set_attribute("pressloop.action.outcome", "cancelled")
                raise
            except Exception as exc:
                self.metrics.action_call(call.name, "error")
                span.set_attribute("pressloop.action.outcome", "error")
                span.set_attribute("error.type", type(exc).__name__)
                span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
                raise
            self.metrics.action_call(call.name, outcome.status.value)
            _action_outcome(span, outcome)
            return outcome


def _action_outcome(span: Span, outcome: ActionOutcome) -> None:
    span.set_attribute("pressloop.action.outcome", outcome.status.value)
    span.set_attribute("pressloop.action.decision", _decision(outcome))
    if outcome.risk is not None:
        span.set_attribute("pressloop.action.risk", outcome.risk.value)
    if outcome.approval_id is not None:
        span.set_attribute("pressloop.approval.id", outcome.approval_id)
    if outcome.status is StepStatus.FAILED:
        span.set_status(Status(StatusCode.ERROR, "failed"))


def _decision(outcome: ActionOutcome) -> str:
    """What the policy (and the untrusted-content guard) decided for the step."""
    if outcome.status is StepStatus.DENIED:
        return "deny"
    if outcome.approval_id is not None or outcome.status in (
        StepStatus.PENDING_APPROVAL,
        StepStatus.REJECTED,
    ):
        return "confirm"
    return "allow"


def _message_parts(message: Message, secret_params: Callable[[str], list[str]]) -> list[Any]:
    parts: list[Any] = []
    if message.tool_call_id is not None:
        parts.append(
            {"type": "tool_call_response", "id": message.tool_call_id, "response": message.content}
        )
    elif message.content:
        parts.append({"type": "text", "content": message.content})
    for call in message.tool_calls:
        arguments = redact(call.params, secret_params(call.name))
        parts.append(
            {"type": "tool_call", "id": call.id, "name": call.name, "arguments": arguments}
        )
    return parts


def _secrets(messages: list[Message], secret_params: Callable[[str], list[str]]) -> list[str]:
    """The secret values the model gave in these messages' tool calls (to scrub everywhere)."""
    return [
        value
        for message in messages
        for call in message.tool_calls
        for value in secret_values(call.params, secret_params(call.name))
        if value != SECRET
    ]


def _request_content(
    span: Span, request: ModelRequest, secret_params: Callable[[str], list[str]]
) -> None:
    """The prompt, as the GenAI conventions put it (only with content capture on)."""
    secrets = _secrets(request.messages, secret_params)
    messages = [
        {"role": m.role.value, "parts": _message_parts(m, secret_params)} for m in request.messages
    ]
    span.set_attribute(
        "gen_ai.system_instructions",
        json.dumps([{"type": "text", "content": request.system}], ensure_ascii=False),
    )
    span.set_attribute(
        "gen_ai.input.messages", json.dumps(scrub_data(messages, secrets), ensure_ascii=False)
    )


def _response_content(
    span: Span, response: ModelResponse, secret_params: Callable[[str], list[str]]
) -> None:
    answer = Message(role=Role.ASSISTANT, content=response.text, tool_calls=response.tool_calls)
    secrets = _secrets([answer], secret_params)
    output = [
        {
            "role": "assistant",
            "parts": _message_parts(answer, secret_params),
            "finish_reason": response.finish_reason or "stop",
        }
    ]
    span.set_attribute(
        "gen_ai.output.messages", json.dumps(scrub_data(output, secrets), ensure_ascii=False)
    )


class RunSpan:
    """The span of one attempt of a run, current while the attempt runs. The first traced
    attempt's trace context is stored with the run (`runs.trace_context`); a later attempt, in
    this process or another, is a child of it, so the run stays one trace. An attempt started
    by a request (an approval decided, a chat `wait`) links to the request's span."""

    def __init__(self, tracer: Tracer, run: RunRecord, worker: str) -> None:
        current = trace.get_current_span().get_span_context()
        stored = run.trace_context
        self.span = tracer.start_span(
            f"invoke_agent {run.agent_id}",
            context=context_of(stored) if stored else None,
            kind=SpanKind.INTERNAL,
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.id": run.agent_id,
                "gen_ai.conversation.id": run.thread_id,
                "pressloop.run.id": run.id,
                "pressloop.thread.id": run.thread_id,
                "pressloop.run.trigger": run.trigger.value,
                "pressloop.run.attempt": run.attempt,
                "pressloop.worker": worker,
            },
            links=[Link(current)] if stored and current.is_valid else None,
        )
        # None: the run has its trace already.
        self.new_context = None if stored else carrier_of(self.span)
        self._token = otel_context.attach(trace.set_span_in_context(self.span))

    def rested(self, status: str) -> None:
        """The attempt ended with the run in `status` (`queued`: a retry)."""
        self.span.set_attribute("pressloop.run.outcome", status)
        if status in ("failed", "dead", "timed_out"):
            self.span.set_status(Status(StatusCode.ERROR, status))

    def end(self, outcome: str | None = None) -> None:
        """End the span (`outcome`: how the attempt ended if the run did not rest)."""
        if outcome is not None:
            self.span.set_attribute("pressloop.run.outcome", outcome)
        otel_context.detach(self._token)
        self.span.end()


def count_reclaimed(metrics: Metrics, reclaimed: claim_store.Reclaimed) -> None:
    """Count the runs a reclaim took back after their lease expired (once it is committed)."""
    metrics.leases_expired(
        requeued=[trigger for _id, trigger in reclaimed.requeued],
        dead=[trigger for _id, trigger in reclaimed.dead],
    )


def _age(now: datetime, since: datetime | None) -> float:
    return max(0.0, (now - since).total_seconds()) if since is not None else 0.0


async def read_database(database: Database, now: Now) -> DatabaseReading:
    """The queue and the approvals pending, for one scrape of `/metrics`."""
    at = now()
    async with database.read() as conn:
        queue = await metrics_reads.queue_state(conn, now=at)
        waiting = await metrics_reads.pending_approvals(conn)
    return DatabaseReading(
        queue_depth=queue.due,
        queue_oldest_age_s=_age(at, queue.oldest_startable_due_at),
        runs_running=queue.running,
        approvals_pending=waiting.pending,
        approvals_oldest_age_s=_age(at, waiting.oldest_created_at),
    )


def metrics_from(settings: Settings) -> Metrics:
    """A process's metrics, with the histogram buckets the settings give."""
    return Metrics(
        run_buckets=parse_buckets(settings.metrics_run_buckets, RUN_BUCKETS),
        model_buckets=parse_buckets(settings.metrics_model_buckets, MODEL_BUCKETS),
    )

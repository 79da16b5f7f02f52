"""Where the runtime tells its `Metrics` what happened (pressloop/observability/metrics.py):
a model call (`ObservedProvider`), an action call (`ObservedActions`), runs reclaimed after
their lease expired (`count_reclaimed`), and what `/metrics` reads from the database at scrape
time (`read_database`). The run's own start and rest are told by the runner."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import datetime

from pressloop.clock import Monotonic, Now
from pressloop.config import Settings
from pressloop.contracts import ActionCall, ActionContext, ActionOutcome, CatalogEntry, Usage
from pressloop.engine.ports import ActionPort
from pressloop.observability.metrics import (
    MODEL_BUCKETS,
    RUN_BUCKETS,
    DatabaseReading,
    Metrics,
    parse_buckets,
)
from pressloop.providers.base import (
    ModelRequest,
    ModelResponse,
    Provider,
    ResponseDone,
    StreamPart,
    WrappedProvider,
)
from pressloop.store import claims as claim_store
from pressloop.store import metrics_reads
from pressloop.store.db import Database


class ObservedProvider(WrappedProvider):
    """Each model call's latency, outcome and tokens, by provider and model."""

    def __init__(
        self, inner: Provider, metrics: Metrics, monotonic: Monotonic = time.monotonic
    ) -> None:
        super().__init__(inner)
        self.metrics = metrics
        self.monotonic = monotonic

    def _told(self, started: float, outcome: str, usage: Usage | None = None) -> None:
        self.metrics.model_call(
            self.inner.name,
            self.inner.model,
            self.monotonic() - started,
            outcome=outcome,
            input_tokens=usage.input_tokens if usage else 0,
            output_tokens=usage.output_tokens if usage else 0,
        )

    async def complete(self, request: ModelRequest) -> ModelResponse:
        started = self.monotonic()
        try:
            response = await self.inner.complete(request)
        except asyncio.CancelledError:
            self._told(started, "cancelled")
            raise
        except Exception:
            self._told(started, "error")
            raise
        self._told(started, "ok", response.usage)
        return response

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        started = self.monotonic()
        usage: Usage | None = None
        outcome = "cancelled"  # the reader stopped before the answer was done
        try:
            async for part in self.inner.stream(request):
                if isinstance(part, ResponseDone):
                    usage, outcome = part.response.usage, "ok"
                yield part
        except asyncio.CancelledError:
            outcome = "cancelled"
            raise
        except Exception:
            outcome = "error"
            raise
        finally:
            self._told(started, outcome, usage)


class ObservedActions:
    """Each action call's outcome (the step's status), by action."""

    def __init__(self, inner: ActionPort, metrics: Metrics) -> None:
        self.inner = inner
        self.metrics = metrics

    def catalog(self) -> list[CatalogEntry]:
        return self.inner.catalog()

    async def run(self, call: ActionCall, context: ActionContext) -> ActionOutcome:
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

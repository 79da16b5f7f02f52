"""Pressloop's metrics, on a registry of its own (never prometheus_client's global one).

`Metrics` is the one observer a process has: the runtime and the API call its small methods
where the events happen (a run starts or rests, a model call, an action, a budget refusal, a
lease expiry, an SSE stream); each process serves its own registry (`pressloop serve` at
`/metrics`, a `pressloop worker` on PRESSLOOP_METRICS_PORT). What is read from the database at
scrape time (the queue, approvals pending) is a separate collector, `DatabaseGauges`, that only
`pressloop serve` registers: the database is shared, so one process reports it.

Label values are bounded: triggers, statuses and outcomes are enums, the provider and model are
the configured ones, an action's name is one of the catalog's (anything else is `unknown`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.gc_collector import GCCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from pressloop.contracts import Trigger

# Seconds. A turn is a few model calls and actions: seconds to minutes (the chat policy's wall
# time is 600 s). A model call: a fraction of a second to the provider timeout (120 s).
RUN_BUCKETS: tuple[float, ...] = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800)
MODEL_BUCKETS: tuple[float, ...] = (0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120)
# A collection's pause: well under a millisecond to a few hundred (a full one over a big heap).
GC_BUCKETS: tuple[float, ...] = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1)
GC_GENERATIONS = ("0", "1", "2")

UNKNOWN_ACTION = "unknown"
DEAD_REASONS = ("retries_exhausted", "lease_expired")
LEASE_OUTCOMES = ("requeued", "dead")
BUDGET_STAGES = ("new_turn", "model_call", "action")


def parse_buckets(text: str, default: Sequence[float]) -> tuple[float, ...]:
    """Histogram bucket bounds from a setting: comma-separated seconds ('' for the default)."""
    values = sorted({float(part) for part in text.split(",") if part.strip()})
    return tuple(values) if values else tuple(default)


class Metrics:
    """The metric definitions and the calls that move them (one object per process)."""

    def __init__(
        self,
        *,
        run_buckets: Sequence[float] = RUN_BUCKETS,
        model_buckets: Sequence[float] = MODEL_BUCKETS,
        process: bool = True,
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        if process:  # process_cpu_seconds_total, process_resident_memory_bytes, gc, ...
            ProcessCollector(registry=self.registry)
            GCCollector(registry=self.registry)
        r = self.registry
        self.runs_started = Counter(
            "pressloop_runs_started",
            "Run attempts started in this process (a claim), by trigger.",
            ["trigger"],
            registry=r,
        )
        self.runs_finished = Counter(
            "pressloop_runs_finished",
            "Runs that came to rest in this process, by trigger and the status they rest in "
            "(succeeded, failed, timed_out, cancelled, dead, waiting_approval).",
            ["trigger", "status"],
            registry=r,
        )
        self.run_duration = Histogram(
            "pressloop_run_duration_seconds",
            "One attempt of a run in this process, from its claim to the status it left in "
            "(queued: a retry).",
            ["trigger", "status"],
            buckets=run_buckets,
            registry=r,
        )
        self.run_retries = Counter(
            "pressloop_run_retries",
            "Runs queued again after a retryable failure (with backoff), by trigger.",
            ["trigger"],
            registry=r,
        )
        self.runs_dead = Counter(
            "pressloop_runs_dead",
            "Runs dead-lettered, by trigger and reason (retries_exhausted, lease_expired).",
            ["trigger", "reason"],
            registry=r,
        )
        self.lease_expiries = Counter(
            "pressloop_lease_expiries",
            "Runs reclaimed by this process after their worker's lease expired, by trigger and "
            "what became of them (requeued, dead).",
            ["trigger", "outcome"],
            registry=r,
        )
        self.leases_lost = Counter(
            "pressloop_leases_lost",
            "Runs this process stopped because another worker had taken them over (fencing).",
            registry=r,
        )
        self.model_calls = Counter(
            "pressloop_model_calls",
            "Model calls, by provider, model and outcome (ok, error, cancelled).",
            ["provider", "model", "outcome"],
            registry=r,
        )
        self.model_latency = Histogram(
            "pressloop_model_call_duration_seconds",
            "One model call (its provider-level retries included), by provider and model.",
            ["provider", "model"],
            buckets=model_buckets,
            registry=r,
        )
        self.model_tokens = Counter(
            "pressloop_model_tokens",
            "Tokens the provider reported, by provider, model and kind (input, output).",
            ["provider", "model", "kind"],
            registry=r,
        )
        self.gc_pauses = Histogram(
            "pressloop_gc_pause_seconds",
            "Collections of Python's cyclic garbage collector in this process, by generation "
            "(2: a full one): the event loop, and every stream it serves, wait meanwhile. "
            "Timed in `pressloop serve` and `pressloop worker` (runtime/collector.py).",
            ["generation"],
            buckets=GC_BUCKETS,
            registry=r,
        )
        # Each generation's series, made (and shown at 0) now: `gc_paused` runs inside a
        # collection, which may have started while this thread held a metric's lock
        # (prometheus-client's are not re-entrant), so it takes no lock but its child's own.
        self._gc_pause_children = {g: self.gc_pauses.labels(g) for g in GC_GENERATIONS}
        self.gc_frozen = Gauge(
            "pressloop_gc_frozen_objects",
            "Objects frozen once start-up was done: no collection walks them again "
            "(runtime/collector.py; 0 in a process that did not settle).",
            registry=r,
        )
        self.action_calls = Counter(
            "pressloop_action_calls",
            "Action calls through the executor, by action and outcome (the step's status: "
            "succeeded, failed, denied, pending_approval, rejected, refused, cancelled, ...).",
            ["action", "outcome"],
            registry=r,
        )
        self.budget_refusals = Counter(
            "pressloop_budget_refusals",
            "Daily budget refusals, by stage (new_turn: 429 before anything is stored; "
            "model_call: the turn ends; action: the step is refused).",
            ["stage"],
            registry=r,
        )
        self.sse_streams = Gauge(
            "pressloop_sse_streams_open",
            "Server-Sent Event streams of run events open in this process.",
            registry=r,
        )
        self._known_actions: Callable[[str], bool] = lambda _name: True
        self._database: DatabaseGauges | None = None
        self._zero_alerting_series()

    def _zero_alerting_series(self) -> None:
        """Show the counters alerts watch at 0 from the start: `increase()` over a series that
        appears with its first event would miss that event."""
        for trigger in Trigger:
            self.run_retries.labels(trigger.value)
            for reason in DEAD_REASONS:
                self.runs_dead.labels(trigger.value, reason)
            for outcome in LEASE_OUTCOMES:
                self.lease_expiries.labels(trigger.value, outcome)
        for stage in BUDGET_STAGES:
            self.budget_refusals.labels(stage)

    # Hooks ---------------------------------------------------------------------------------

    def _child(self, metric: Any, *values: str) -> Any:
        """`metric.labels(*values)`, kept: prometheus-client validates the labels and takes a
        lock on every call (several microseconds a model call, measured); the label values
        are few (triggers, statuses, outcomes, providers, known actions), so their children
        are looked up once."""
        key = (id(metric), values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*values)
        return child

    def run_started(self, trigger: str) -> None:
        self._child(self.runs_started, trigger).inc()

    def run_rested(self, trigger: str, status: str, seconds: float) -> None:
        """An attempt ended: `status` is the run's next status (`queued`: a retry)."""
        self._child(self.run_duration, trigger, status).observe(max(0.0, seconds))
        if status == "queued":
            self._child(self.run_retries, trigger).inc()
            return
        self._child(self.runs_finished, trigger, status).inc()
        if status == "dead":
            self._child(self.runs_dead, trigger, "retries_exhausted").inc()

    def lease_lost(self) -> None:
        self.leases_lost.inc()

    def leases_expired(self, requeued: Iterable[str], dead: Iterable[str]) -> None:
        """Runs reclaimed after their lease expired: the triggers of those requeued and dead."""
        for trigger in requeued:
            self._child(self.lease_expiries, trigger, "requeued").inc()
        for trigger in dead:
            self._child(self.lease_expiries, trigger, "dead").inc()
            self._child(self.runs_dead, trigger, "lease_expired").inc()

    def model_call(
        self,
        provider: str,
        model: str,
        seconds: float,
        *,
        outcome: str,
        input_tokens: int = 0,
        output_tokens: int = 0,
    ) -> None:
        self._child(self.model_calls, provider, model, outcome).inc()
        self._child(self.model_latency, provider, model).observe(max(0.0, seconds))
        if input_tokens:
            self._child(self.model_tokens, provider, model, "input").inc(input_tokens)
        if output_tokens:
            self._child(self.model_tokens, provider, model, "output").inc(output_tokens)

    def gc_settled(self, frozen: int) -> None:
        self.gc_frozen.set(frozen)

    def gc_paused(self, generation: int, seconds: float) -> None:
        child = self._gc_pause_children.get(str(generation))
        if child is not None:
            child.observe(seconds)

    def know_actions(self, known: Callable[[str], bool]) -> None:
        """Which names are actions (the registry's): others are counted as `unknown`."""
        self._known_actions = known

    def action_call(self, action: str, outcome: str) -> None:
        name = action if self._known_actions(action) else UNKNOWN_ACTION
        self._child(self.action_calls, name, outcome).inc()

    def budget_refused(self, stage: str) -> None:
        self._child(self.budget_refusals, stage).inc()

    def watch_streams(self, count: Callable[[], int]) -> None:
        """The open-streams gauge reads `count` at scrape time (the API's stream tracker)."""
        self.sse_streams.set_function(count)

    def database_gauges(self) -> DatabaseGauges:
        """The gauges of the shared database, registered on first use: only the process that
        serves them (`pressloop serve`) asks, so workers never repeat them."""
        if self._database is None:
            self._database = DatabaseGauges()
            self.registry.register(self._database)
        return self._database


@dataclass(kw_only=True, frozen=True)
class DatabaseReading:
    """What `pressloop serve` reads from the database for one scrape."""

    queue_depth: int = 0
    queue_oldest_age_s: float = 0.0
    runs_running: int = 0
    approvals_pending: int = 0
    approvals_oldest_age_s: float = 0.0


class DatabaseGauges(Collector):
    """Gauges of the shared database, from the reading made just before the scrape."""

    def __init__(self) -> None:
        # None: the database did not answer this scrape (the gauges are left out, not stale).
        self.reading: DatabaseReading | None = DatabaseReading()

    def describe(self) -> Iterator[Metric]:
        return iter(())  # computed at scrape time; nothing to check at registration

    def collect(self) -> Iterator[Metric]:
        reading = self.reading
        if reading is None:
            return
        values: list[tuple[str, str, float]] = [
            (
                "pressloop_queue_depth",
                "Queued runs that are due now (behind a busy thread or not).",
                reading.queue_depth,
            ),
            (
                "pressloop_queue_oldest_age_seconds",
                "How long the oldest run that could start now (due, first on its idle thread) "
                "has waited since it became due; 0 when none waits.",
                reading.queue_oldest_age_s,
            ),
            ("pressloop_runs_running", "Runs running now, in any process.", reading.runs_running),
            (
                "pressloop_approvals_pending",
                "Approvals waiting for a person.",
                reading.approvals_pending,
            ),
            (
                "pressloop_approvals_oldest_age_seconds",
                "How long the oldest pending approval has waited; 0 when none waits.",
                reading.approvals_oldest_age_s,
            ),
        ]
        for name, documentation, value in values:
            yield GaugeMetricFamily(name, documentation, value=value)

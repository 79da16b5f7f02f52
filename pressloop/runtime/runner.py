"""The runner: turn one claimed run into one engine turn, and its outcome into durable state.

Nothing here is chat-specific: chat, background workers, heartbeats and spawns all hand their
claimed runs to `Runner.run_claim`.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.trace import Tracer

from pressloop.actions.registry import ActionServices, Registry
from pressloop.actions.site_context_port import SiteContextSource
from pressloop.clock import Monotonic, Now, utc_now
from pressloop.config import Settings
from pressloop.contracts import (
    ErrorInfo,
    EventType,
    NextAction,
    RunStatus,
    StepStatus,
    TurnRequest,
    TurnResult,
    TurnStatus,
)
from pressloop.engine.loop import run_turn
from pressloop.errors import LeaseLost, PressloopError
from pressloop.observability import tracing
from pressloop.observability.logs import bind_run, unbind_run
from pressloop.observability.metrics import Metrics
from pressloop.providers.base import Provider
from pressloop.runtime.budgets import site_subject
from pressloop.runtime.bus import EventBus
from pressloop.runtime.cancel_watch import CancelWatch
from pressloop.runtime.claiming import Claimer
from pressloop.runtime.commit_loop import CommitLoop
from pressloop.runtime.commits import Committer
from pressloop.runtime.context import RunContext, load_contexts
from pressloop.runtime.interrupt import (
    ActionsInFlight,
    TurnParts,
    cancelled_turn,
    run_cancellable,
)
from pressloop.runtime.leases import LeaseKeeper
from pressloop.runtime.observed import RunSpan
from pressloop.runtime.outcome import minus, outcome
from pressloop.runtime.pacing import Pacer
from pressloop.runtime.reports import after_finish
from pressloop.runtime.session import RunSession
from pressloop.runtime.stream_relays import StreamRelays
from pressloop.runtime.turn_deps import TurnDeps
from pressloop.runtime.usage_buffer import UsageBuffer
from pressloop.store import run_finish
from pressloop.store.db import Database
from pressloop.store.records import Claim, RunRecord
from pressloop.store.run_writes import FinishWrite

log = logging.getLogger(__name__)


@dataclass(kw_only=True)
class Runner:
    database: Database
    settings: Settings
    registry: Registry
    bus: EventBus
    provider: Callable[[], Provider]
    owner: str
    # What the actions use (`runtime/wiring.py`), complete: the runner adds nothing.
    services: ActionServices
    # The SITE_CONTEXT of every prompt, from the configured site's pack (None: no site).
    site_context: SiteContextSource | None = None
    # Told about runs this runner queued (a woken parent), so a worker can start them at once.
    on_queued: Callable[[str], None] | None = None
    # Before each turn: the outside MCP servers' tools brought into the registry; returns what
    # MCP_TOOL_CATALOG says of the servers beyond their tools (`runtime/mcp_tools.py`).
    outside_tools: Callable[[], Awaitable[str]] | None = None
    now: Now = utc_now
    monotonic: Monotonic = time.monotonic
    rand: Callable[[], float] = random.random
    history_limit: int = 60
    # This process's metrics (pressloop/observability/): told when runs start and rest.
    metrics: Metrics = field(default_factory=Metrics)
    # Spans of each attempt, model call and action (None: tracing is off, nothing is traced).
    tracer: Tracer | None = field(default_factory=tracing.tracer)
    # The runs whose streams the stream process writes (`runtime/stream_relays.py`).
    relays: StreamRelays = field(default_factory=lambda: StreamRelays(""))
    # The runs this process runs now, by id.
    sessions: dict[str, RunSession] = field(default_factory=dict, init=False)
    usage: UsageBuffer = field(init=False)
    committer: Committer = field(init=False)
    # One per process (the runner's loop): where the turns' steps and the commits take turns.
    pacer: Pacer | None = field(init=False)
    leases: LeaseKeeper = field(init=False)
    cancels: CancelWatch = field(init=False)
    claimer: Claimer = field(init=False)

    def __post_init__(self) -> None:
        self.usage = UsageBuffer(
            self.database, interval_s=self.settings.usage_flush_s, monotonic=self.monotonic
        )
        own_loop = self._commits_on_own_loop()
        self.pacer = Pacer() if self.settings.pacing else None
        self.committer = Committer(
            self.database,
            self.bus,
            now=self.now,
            lease_ttl_s=self.settings.lease_ttl_s,
            max_batch=self.settings.commit_batch,
            commit_loop=CommitLoop(self.database) if own_loop else None,
            # A commit on a loop of its own waits behind nothing of the main loop's.
            pacer=None if own_loop else self.pacer,
            gather_s=self.settings.commit_gather_s,
            in_flight=lambda: len(self.sessions),
            delta_commit_s=self.settings.delta_commit_s,
        )
        self.leases = LeaseKeeper(
            self.sessions, renew_s=self.settings.lease_renew_s, monotonic=self.monotonic
        )
        self.cancels = CancelWatch(self.database, self.sessions, poll_s=self.settings.cancel_poll_s)
        self.claimer = Claimer(
            database=self.database,
            settings=self.settings,
            owner=self.owner,
            now=self.now,
            history_limit=self.history_limit,
        )

    def _commits_on_own_loop(self) -> bool:
        """PostgreSQL's group commit on a loop of its own (`commit_loop.py`), when asked
        (`PRESSLOOP_COMMIT_THREAD`); SQLite's writers take turns on the main loop."""
        return self.settings.commit_thread and not self.database.is_sqlite

    async def close(self) -> None:
        """Wait for the last writes and write the usage counters (the service is closing)."""
        await self.leases.close()
        await self.cancels.close()
        await self.committer.close()
        await self.usage.flush()

    async def run_claim(self, claim: Claim) -> RunRecord | None:
        """Run a claimed run to its next resting state; None if the lease was lost meanwhile."""
        run = claim.run
        context = self.claimer.take_context(run.id)
        session = RunSession(
            database=self.database,
            claim=claim,
            committer=self.committer,
            now=self.now,
            last_seq=claim.last_seq,
            monotonic=self.monotonic,
        )
        self.sessions[run.id] = session
        self.leases.watch()
        self.cancels.watch()
        logged = bind_run(run.id, run.thread_id)  # every log line of the turn names the run
        started = self.monotonic()
        traced = RunSpan(self.tracer, run, self.owner) if self.tracer is not None else None
        if traced is not None and traced.new_context is not None:
            session.keep_trace_context(traced.new_context)  # written with the first write
        unrested: str | None = None  # how the attempt ended when the run did not rest
        try:
            await session.emit(
                EventType.RUN_STARTED,
                {"attempt": run.attempt, "trigger": run.trigger.value, "worker": self.owner},
            )
            self.metrics.run_started(run.trigger.value)
            log.info("run %s started (%s, attempt %d)", run.id, run.trigger.value, run.attempt)
            try:
                result = await self._cancellable_turn(run, session, context)
            except LeaseLost:
                raise
            except Exception as exc:
                # A bug or a database hiccup: record it and retry with backoff, so a run never
                # stays `running` with nobody behind it (repeated, it ends `dead`).
                log.exception("run %s crashed", run.id)
                result = TurnResult(
                    status=TurnStatus.FAILED,
                    error=ErrorInfo(cls=type(exc).__name__, message=str(exc), retryable=True),
                    next_action=NextAction.RESCHEDULE,
                )
            finished = await self._finish(run, session, result)
            self.metrics.run_rested(
                run.trigger.value, finished.status.value, self.monotonic() - started
            )
            if traced is not None:
                traced.rested(finished.status.value)
            log.info("run %s rests %s", run.id, finished.status.value)
        except LeaseLost as lost:
            unrested = "lease_lost"
            self.metrics.lease_lost()
            log.warning("run %s: %s", run.id, lost.message)
            return None
        except asyncio.CancelledError:
            # The worker is shutting down: hand the run back now rather than at lease expiry.
            unrested = "released"
            await self._release(run, session)
            raise
        except Exception:
            # The session could not write (the database refused or was unreachable): hand the
            # run back now if we can; else its lease expires and it is reclaimed. Either way it
            # resumes from its last checkpoint.
            log.exception("run %s: could not record its outcome", run.id)
            unrested = "handed_back"
            await self._hand_back(session)
            return None
        finally:
            if self.sessions.get(run.id) is session:  # not the next attempt's (a retry)
                del self.sessions[run.id]
            await session.close()
            # Readers of the run that relied on this process's events look at the database.
            self.bus.notify(run.id)
            if traced is not None:
                traced.end(unrested)
            unbind_run(logged)
        return finished

    async def _hand_back(self, session: RunSession) -> None:
        now = self.now()
        try:
            async with self.database.write() as conn:
                await run_finish.finish_run(
                    conn,
                    session.claim,
                    status=RunStatus.QUEUED,
                    now=now,
                    not_before=now,
                    checkpoint=session.last_checkpoint,
                )
        except Exception:
            log.warning("run %s: not handed back; its lease will expire", session.run_id)

    def runs_here(self, run_id: str) -> bool:
        """Whether this process runs `run_id` now (its events reach this process's bus)."""
        return run_id in self.sessions

    def signal_cancel(self, run_id: str) -> None:
        """A person asked to stop a run: if this process runs it, stop its turn now (other
        processes learn it from the database: `CancelWatch`, and every commit)."""
        session = self.sessions.get(run_id)
        if session is not None:
            session.request_cancel()

    async def _release(self, run: RunRecord, session: RunSession) -> None:
        now = self.now()
        try:
            await session.emit(
                EventType.ERROR,
                {
                    "cls": "WorkerStopped",
                    "message": "the worker stopped; the run was requeued",
                    "retryable": True,
                },
            )
            values = run_finish.finish_values(
                status=RunStatus.QUEUED,
                now=now,
                not_before=now,
                checkpoint=session.last_checkpoint,
                event_seq=session.seq,
            )
            await session.finish(FinishWrite(values=values, at=now))
        except Exception:  # the lease will expire and the run be reclaimed anyway
            log.warning("run %s: could not requeue on shutdown", run.id)

    async def _cancellable_turn(
        self, run: RunRecord, session: RunSession, context: RunContext | None
    ) -> TurnResult:
        """The turn, stopped at once by a cancel request whatever it awaits (`interrupt.py`)."""
        parts = TurnParts()
        result = await run_cancellable(session, self._turn(run, session, context, parts))
        if result is not None:
            return result
        return await cancelled_turn(
            run, session, parts, registry=self.registry, services=self.services
        )

    async def _turn(
        self, run: RunRecord, session: RunSession, context: RunContext | None, parts: TurnParts
    ) -> TurnResult:
        try:
            provider = self.provider()
        except PressloopError as problem:
            await session.emit(EventType.ERROR, problem.info().model_dump())
            return TurnResult(status=TurnStatus.FAILED, error=problem.info())
        if context is None:  # claimed elsewhere (or long ago): read it now
            async with self.database.read() as conn:
                found = await load_contexts(
                    conn,
                    [run],
                    settings=self.settings,
                    day=self.now().date().isoformat(),
                    history_limit=self.history_limit,
                )
            context = found[run.id]
        if context.refusal is not None:
            await session.emit(EventType.ERROR, context.refusal.info().model_dump())
            return TurnResult(status=TurnStatus.FAILED, error=context.refusal.info())
        notes = await self.outside_tools() if self.outside_tools is not None else ""
        # Built each attempt from the runner's parts as they are now (a test may swap one).
        deps = TurnDeps(
            counting=self,
            settings=self.settings,
            registry=self.registry,
            services=self.services,
            metrics=self.metrics,
            monotonic=self.monotonic,
            tracer=self.tracer,
            pacer=self.pacer,
            relays=self.relays,
        ).build(run, context, provider, session)
        deps.prompt.mcp_tool_catalog = notes
        parts.deps = deps
        parts.actions = deps.actions = ActionsInFlight(deps.actions)
        if self.site_context is not None:
            deps.prompt.site_context = await self.site_context.text()
        request = TurnRequest(
            thread_id=run.thread_id,
            run_id=run.id,
            agent_id=run.agent_id,
            trigger=run.trigger,
            message=run.input,
            requesting_user=run.requesting_user,
            execution_user=run.execution_user,
            policy=run.policy,
            idempotency_key=run.idempotency_key,
            checkpoint=run.checkpoint,
        )
        return await run_turn(request, deps)

    def _changed_site_context(self, result: TurnResult) -> bool:
        """Whether an action that changes the SITE_CONTEXT succeeded in this turn."""
        for step in result.steps:
            spec = self.registry.get(step.action)
            if spec and spec.changes_site_context and step.status is StepStatus.SUCCEEDED:
                return True
        return False

    async def _finish(self, run: RunRecord, session: RunSession, result: TurnResult) -> RunRecord:
        now = self.now()
        if self.site_context is not None and self._changed_site_context(result):
            self.site_context.invalidate()
        end = outcome(
            run, result, session.last_checkpoint, settings=self.settings, now=now, rand=self.rand
        )
        await session.emit(end.event, end.event_data)
        fields: dict[str, Any] = {
            "status": end.status,
            "now": now,
            "result": end.result,
            "error": end.result.error,
            "usage": result.usage,
            "checkpoint": end.checkpoint,
            "not_before": end.not_before,
            "attempt": end.attempt,
            "event_seq": session.seq,
        }
        # Spawned agents' reports, in the same transaction (`reports.py`).
        reports = after_finish(
            run, end.status, result, now=now, max_attempts=self.settings.max_attempts
        )
        woken = await session.finish(
            FinishWrite(
                values=run_finish.finish_values(**fields), at=now, transcript=end.transcript
            ),
            reports,
        )
        # The day's counters are shared by every run: summed here, written once an interval.
        self.usage.add(
            day=now.date().isoformat(),
            subjects={
                "user": run.requesting_user or "anonymous",
                "site": site_subject(self.settings),
            },
            usage=minus(result.usage, run.usage),
            runs=1 if end.status is not RunStatus.QUEUED else 0,
            refusals=int(result.error is not None and result.error.cls == "BudgetExceeded"),
        )
        try:
            await self.usage.flush_if_due()
        except Exception:  # counters must not fail a finished run; the next flush retries
            log.warning("usage counters not written yet", exc_info=True)
        if woken is not None and self.on_queued is not None:
            self.on_queued(woken)
        return run_finish.finished_record(run, **fields)

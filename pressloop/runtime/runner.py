"""The runner: turn one claimed run into one engine turn, and its outcome into durable state.

Nothing here is chat-specific: chat, background workers, heartbeats and spawns all hand their
claimed runs to `Runner.run_claim`.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from sqlalchemy.ext.asyncio import AsyncConnection

from pressloop.actions.executor import Executor
from pressloop.actions.registry import ActionServices, Registry
from pressloop.actions.wordpress.site_context import CHANGES_CONTEXT, SiteContextCache
from pressloop.config import Settings
from pressloop.contracts import (
    FINAL_RUN_STATUSES,
    Checkpoint,
    DecisionProtocol,
    ErrorInfo,
    EventType,
    Message,
    NextAction,
    Role,
    RunStatus,
    StepStatus,
    Trigger,
    TurnRequest,
    TurnResult,
    TurnStatus,
    Usage,
)
from pressloop.engine.loop import run_turn
from pressloop.engine.ports import EngineDeps, PromptContext
from pressloop.engine.prompt import memory_context
from pressloop.engine.transcript import close_dangling_calls
from pressloop.errors import BudgetExceeded, LeaseLost, PressloopError
from pressloop.providers.base import Provider
from pressloop.runtime.approvals import SessionApprovals
from pressloop.runtime.backoff import full_jitter
from pressloop.runtime.budgets import check_budgets, site_subject
from pressloop.runtime.bus import EventBus
from pressloop.runtime.clock import Now, utc_now
from pressloop.runtime.ledger import SessionLedger
from pressloop.runtime.memory import StoreMemory
from pressloop.runtime.session import RunSession
from pressloop.runtime.spawn import Spawner, deliver_to_parent
from pressloop.runtime.usage_buffer import UsageBuffer
from pressloop.store import agents as agent_store
from pressloop.store import claims as claim_store
from pressloop.store import memories as memory_store
from pressloop.store import runs as run_store
from pressloop.store import settings_repo
from pressloop.store import threads as thread_store
from pressloop.store.db import Database
from pressloop.store.records import Claim, RunRecord

log = logging.getLogger(__name__)

KILL_SWITCH_SETTING = "agent_disabled"
HEARTBEAT_OK = "HEARTBEAT_OK"
ENDED_EARLY = "not run: the turn ended before this action ran"

TURN_TO_RUN_STATUS = {
    TurnStatus.SUCCEEDED: RunStatus.SUCCEEDED,
    TurnStatus.REQUIRES_APPROVAL: RunStatus.WAITING_APPROVAL,
    TurnStatus.FAILED: RunStatus.FAILED,
    TurnStatus.TIMED_OUT: RunStatus.TIMED_OUT,
    TurnStatus.CANCELLED: RunStatus.CANCELLED,
}


@dataclass(kw_only=True)
class Runner:
    database: Database
    settings: Settings
    registry: Registry
    bus: EventBus
    provider: Callable[[], Provider]
    owner: str
    now: Now = utc_now
    rand: Callable[[], float] = random.random
    services: ActionServices = field(default_factory=ActionServices)
    history_limit: int = 60
    # Told about runs this runner queued (a woken parent), so a worker can start them at once.
    on_queued: Callable[[str], None] | None = None
    sessions: dict[str, RunSession] = field(default_factory=dict)
    site_context: SiteContextCache = field(default_factory=SiteContextCache)
    usage: UsageBuffer = field(init=False)

    def __post_init__(self) -> None:
        self.usage = UsageBuffer(self.database, interval_s=self.settings.usage_flush_s)

    async def claim_many(self, limit: int) -> list[Claim]:
        async with self.database.write() as conn:
            return await claim_store.claim_runs(
                conn,
                owner=self.owner,
                ttl_s=self.settings.lease_ttl_s,
                now=self.now(),
                limit=limit,
            )

    async def claim(self, run_id: str | None = None) -> Claim | None:
        async with self.database.write() as conn:
            return await claim_store.claim_run(
                conn,
                owner=self.owner,
                ttl_s=self.settings.lease_ttl_s,
                now=self.now(),
                run_id=run_id,
            )

    async def run_claim(self, claim: Claim) -> RunRecord | None:
        """Run a claimed run to its next resting state; None if the lease was lost meanwhile."""
        run = claim.run
        session = RunSession(
            database=self.database,
            claim=claim,
            bus=self.bus,
            now=self.now,
            lease_ttl_s=self.settings.lease_ttl_s,
            lease_renew_s=self.settings.lease_renew_s,
            last_seq=claim.last_seq,
        )
        session.start()
        self.sessions[run.id] = session
        try:
            await session.emit(
                EventType.RUN_STARTED,
                {"attempt": run.attempt, "trigger": run.trigger.value, "worker": self.owner},
            )
            try:
                result = await self._turn(run, session)
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
        except LeaseLost as lost:
            log.warning("run %s: %s", run.id, lost.message)
            return None
        except asyncio.CancelledError:
            # The worker is shutting down: hand the run back now rather than at lease expiry.
            await self._release(run, session)
            raise
        except Exception:
            # The session could not write (the database refused or was unreachable): hand the
            # run back now if we can; else its lease expires and it is reclaimed. Either way it
            # resumes from its last checkpoint.
            log.exception("run %s: could not record its outcome", run.id)
            await self._hand_back(session)
            return None
        finally:
            self.sessions.pop(run.id, None)
            await session.close()
        return finished

    async def _hand_back(self, session: RunSession) -> None:
        now = self.now()
        try:
            async with self.database.write() as conn:
                await run_store.finish_run(
                    conn,
                    session.claim,
                    status=RunStatus.QUEUED,
                    now=now,
                    not_before=now,
                    checkpoint=session.last_checkpoint,
                )
        except Exception:
            log.warning("run %s: not handed back; its lease will expire", session.run_id)

    def signal_cancel(self, run_id: str) -> None:
        """A person asked to stop a run this process is running: tell it without waiting for
        its next write (other processes learn it from the database at their next write)."""
        session = self.sessions.get(run_id)
        if session is not None:
            session.cancel_requested = True

    async def _release(self, run: RunRecord, session: RunSession) -> None:
        now = self.now()

        async def requeue(conn: AsyncConnection) -> None:
            await run_store.finish_run(
                conn,
                session.claim,
                status=RunStatus.QUEUED,
                now=now,
                not_before=now,
                checkpoint=session.last_checkpoint,
                event_seq=session.seq,
            )

        try:
            await session.emit(
                EventType.ERROR,
                {
                    "cls": "WorkerStopped",
                    "message": "the worker stopped; the run was requeued",
                    "retryable": True,
                },
            )
            await session.write(requeue, fenced=True)
        except Exception:  # the lease will expire and the run be reclaimed anyway
            log.warning("run %s: could not requeue on shutdown", run.id)

    async def _turn(self, run: RunRecord, session: RunSession) -> TurnResult:
        try:
            provider = self.provider()
        except PressloopError as problem:
            await session.emit(EventType.ERROR, problem.info().model_dump())
            return TurnResult(status=TurnStatus.FAILED, error=problem.info())
        async with self.database.read() as conn:
            try:
                await check_budgets(
                    conn,
                    self.settings,
                    user=run.requesting_user,
                    day=self.now().date().isoformat(),
                )
            except BudgetExceeded as refused:
                await session.emit(EventType.ERROR, refused.info().model_dump())
                return TurnResult(status=TurnStatus.FAILED, error=refused.info())
            deps = await self._deps(conn, run, provider, session)
        if self.services.wordpress is not None:
            deps.prompt.site_context = await self.site_context.text(self.services.wordpress)
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

    async def _deps(
        self, conn: AsyncConnection, run: RunRecord, provider: Provider, session: RunSession
    ) -> EngineDeps:
        agent = await agent_store.get_agent(conn, run.agent_id)
        history = await thread_store.list_messages(conn, run.thread_id, limit=self.history_limit)
        memories = await memory_store.search_memories(conn, run.agent_id, run.input or "", limit=8)
        disabled = self.settings.disable_agent or bool(
            await settings_repo.get_setting(conn, KILL_SWITCH_SETTING, False)
        )
        protocol_setting = self.settings.decision_protocol
        return EngineDeps(
            provider=provider,
            actions=self._executor(run, session),
            history=history,
            prompt=PromptContext(
                instructions=agent.instructions if agent else "",
                agent_files=agent.files if agent else {},
                memory_context=memory_context([m.content for m in memories]),
            ),
            protocol=None if protocol_setting == "auto" else DecisionProtocol(protocol_setting),
            emit=session.emit,
            save_checkpoint=session.save_checkpoint,
            cancel_requested=lambda: session.cancel_requested,
            disabled=disabled,
            max_output_tokens=self.settings.max_output_tokens,
        )

    def _executor(self, run: RunRecord, session: RunSession) -> Executor:
        services = self.services_for(run)
        return Executor(
            self.registry,
            services,
            ledger=SessionLedger(session),
            approvals=SessionApprovals(session, services, self.settings.approval_expiry_s),
        )

    def services_for(self, run: RunRecord) -> ActionServices:
        return ActionServices(
            memory=self.services.memory or StoreMemory(self.database, self.now),
            spawner=self.services.spawner
            or Spawner(self.database, self.now, max_attempts=self.settings.max_attempts),
            wordpress=self.services.wordpress,
            extra=self.services.extra,
        )

    async def _finish(self, run: RunRecord, session: RunSession, result: TurnResult) -> RunRecord:
        now = self.now()
        status = TURN_TO_RUN_STATUS[result.status]
        not_before = None
        attempt = None
        retry = result.next_action is NextAction.RESCHEDULE and result.error is not None
        if retry:
            if run.attempt < run.max_attempts:
                status = RunStatus.QUEUED
                delay = full_jitter(
                    run.attempt,
                    base_s=self.settings.backoff_base_s,
                    cap_s=self.settings.backoff_cap_s,
                    rand=self.rand,
                )
                not_before = now.fromtimestamp(now.timestamp() + delay, tz=now.tzinfo)
                attempt = run.attempt + 1
            else:
                status = RunStatus.DEAD
        if any(
            s.action in CHANGES_CONTEXT and s.status is StepStatus.SUCCEEDED for s in result.steps
        ):
            self.site_context.clear()
        checkpoint = session.last_checkpoint or _initial_checkpoint(run)
        transcript: list[Message] = []
        if status in FINAL_RUN_STATUSES and not _quiet_heartbeat(run, result):
            transcript = close_dangling_calls(checkpoint.messages, ENDED_EARLY)
        usage_delta = _minus(result.usage, run.usage)
        finished = {"status": status.value, "result": result.model_dump(mode="json")}
        if not_before is not None:
            finished["retry_at"] = not_before.isoformat()
        if status is RunStatus.QUEUED:
            await session.emit(
                EventType.ERROR,
                {
                    **(result.error or ErrorInfo(cls="", message="")).model_dump(),
                    "retry_at": finished.get("retry_at"),
                    "attempt": run.attempt,
                },
            )
        else:
            await session.emit(EventType.RUN_FINISHED, finished)

        stored: list[RunRecord] = []

        async def persist(conn: AsyncConnection) -> None:
            stored.append(
                await run_store.finish_run(
                    conn,
                    session.claim,
                    status=status,
                    now=now,
                    result=result,
                    error=result.error,
                    usage=result.usage,
                    checkpoint=checkpoint,
                    not_before=not_before,
                    attempt=attempt,
                    event_seq=session.seq,
                )
            )
            await thread_store.append_messages(
                conn, run.thread_id, transcript, now=now, run_id=run.id
            )
            await thread_store.touch_thread(conn, run.thread_id, now=now)
            if run.trigger is Trigger.SPAWNED and status in FINAL_RUN_STATUSES:
                thread = await thread_store.get_thread(conn, run.thread_id)
                if thread is not None and thread.parent_id is not None:
                    woken = await deliver_to_parent(
                        conn,
                        thread,
                        run.id,
                        status,
                        result,
                        now=now,
                        max_attempts=self.settings.max_attempts,
                    )
                    if woken is not None:
                        queued.append(woken)

        queued: list[str] = []
        await session.write(persist, fenced=True)
        # The day's counters are shared by every run: summed here, written once an interval.
        self.usage.add(
            day=now.date().isoformat(),
            subjects={
                "user": run.requesting_user or "anonymous",
                "site": site_subject(self.settings),
            },
            usage=usage_delta,
            runs=1 if status is not RunStatus.QUEUED else 0,
            refusals=int(result.error is not None and result.error.cls == "BudgetExceeded"),
        )
        try:
            await self.usage.flush_if_due()
        except Exception:  # counters must not fail a finished run; the next flush retries
            log.warning("usage counters not written yet", exc_info=True)
        for run_id in queued:
            if self.on_queued is not None:
                self.on_queued(run_id)
        return stored[0]


def _quiet_heartbeat(run: RunRecord, result: TurnResult) -> bool:
    """A heartbeat that found nothing to do leaves no message noise in its thread."""
    return (
        run.trigger is Trigger.HEARTBEAT
        and result.status is TurnStatus.SUCCEEDED
        and not result.steps
        and result.assistant_text.strip().strip(".").upper() == HEARTBEAT_OK
    )


def _initial_checkpoint(run: RunRecord) -> Checkpoint:
    if run.checkpoint is not None:
        return run.checkpoint
    messages = [Message(role=Role.USER, content=run.input)] if run.input else []
    return Checkpoint(messages=messages)


def _minus(total: Usage, before: Usage) -> Usage:
    return Usage(
        input_tokens=max(0, total.input_tokens - before.input_tokens),
        output_tokens=max(0, total.output_tokens - before.output_tokens),
        model_calls=max(0, total.model_calls - before.model_calls),
        action_calls=max(0, total.action_calls - before.action_calls),
    )

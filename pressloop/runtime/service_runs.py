"""What people and outside callers ask the Service to do with runs: start one on a thread
(chat, API, MCP's direct tool calls), spawn a child agent, decide an approval, undo, cancel,
requeue, run one here now.

Split from `service.py` so each file keeps one job; `Service` inherits these (with the reads
they build on) and provides the attributes declared below.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from sqlalchemy.exc import IntegrityError

from pressloop.actions.registry import Registry
from pressloop.contracts import Checkpoint, Multitask, RunStatus, Trigger
from pressloop.errors import Conflict, InvalidRequest, NotFound, PayloadTooLarge
from pressloop.observability.metrics import Metrics
from pressloop.runtime.approvals import Approvals
from pressloop.runtime.budget_gate import refuse_new_turn
from pressloop.runtime.budgets import check_cooldown
from pressloop.runtime.bus import Subscription
from pressloop.runtime.direct_calls import direct_call
from pressloop.runtime.enqueue import RunRequest, enqueue_run
from pressloop.runtime.kill_switch import refuse_if_disabled
from pressloop.runtime.mcp_tools import McpTools
from pressloop.runtime.observed import count_reclaimed
from pressloop.runtime.outcome import cancelled_transcript
from pressloop.runtime.service_reads import ServiceReads
from pressloop.runtime.spawn import Spawned, Spawner
from pressloop.runtime.turn_reads import read_turn
from pressloop.runtime.undo import Undo
from pressloop.runtime.worker import Worker
from pressloop.store import agents as agent_store
from pressloop.store import claims as claim_store
from pressloop.store import runs as run_store
from pressloop.store import threads as thread_store
from pressloop.store.approvals import ApprovalRecord
from pressloop.store.records import Claim, RunRecord, ThreadRecord


@dataclass(kw_only=True)
class Submission:
    run: RunRecord
    created: bool
    # With `start_here`: the task running the new run in this process (its resting record).
    started: asyncio.Task[RunRecord | None] | None = None
    # With `follow`: a subscription to the new run's events made before its first one, for
    # `follow(subscription=...)`, which then owns it (None: the run is not started here).
    subscription: Subscription | None = None


@dataclass(kw_only=True, frozen=True)
class _Turn:
    """What `submit` was asked to store (it may store it twice: see there)."""

    thread_id: str
    message: str | None
    trigger: Trigger
    user: str | None
    multitask: Multitask
    idempotency_key: str | None
    policy: dict[str, Any] | None
    direct: Checkpoint | None


class ServiceRuns(ServiceReads):
    registry: Registry
    metrics: Metrics
    mcp_tools: McpTools
    spawner: Spawner
    approvals: Approvals
    undoer: Undo
    worker: Worker | None
    runs_turns: bool
    _tasks: set[asyncio.Task[Any]]

    def _queued(self, _run_id: str) -> None:
        """A run is queued: this process's worker (if it has one) looks now, not at its poll."""
        if self.worker is not None:
            self.worker.wake()

    def _keep(self, task: asyncio.Task[Any]) -> None:
        """Hold `task` until it is done (the loop keeps only weak references), and cancel it
        with the service (`close`)."""
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # Threads ---------------------------------------------------------------------------------

    async def create_thread(
        self,
        *,
        title: str = "",
        created_by: str | None = None,
        agent_id: str = agent_store.DEFAULT_AGENT_ID,
        metadata: dict[str, Any] | None = None,
    ) -> ThreadRecord:
        # The foreign key checks that the agent exists, in the insert's round trip: an
        # IntegrityError whose agent is indeed missing is the 404.
        try:
            async with self.database.write() as conn:
                return await thread_store.create_thread(
                    conn,
                    agent_id=agent_id,
                    now=self.now(),
                    title=title,
                    created_by=created_by,
                    metadata=metadata,
                )
        except IntegrityError:
            async with self.database.read() as conn:
                if await agent_store.get_agent(conn, agent_id) is None:
                    raise NotFound(f"agent {agent_id!r} does not exist") from None
            raise

    # Runs ------------------------------------------------------------------------------------

    async def submit(
        self,
        thread_id: str,
        message: str | None,
        *,
        trigger: Trigger = Trigger.CHAT,
        user: str | None = None,
        multitask: Multitask = Multitask.ENQUEUE,
        idempotency_key: str | None = None,
        policy: dict[str, Any] | None = None,
        start_here: bool = False,
        direct: Checkpoint | None = None,
        follow: bool = False,
    ) -> Submission:
        """Queue a run of `message` on the thread, following `multitask` if the thread is busy.

        `start_here`: this process runs a new run at once, claimed in the transaction that
        creates it (one transaction fewer a turn), instead of waking the worker (both at once
        would race to claim it, and one claim would be wasted).
        `direct`: the run executes the calls this checkpoint holds, with no model
        (`call_action`); no cooldown (that spaces out a person's messages to the model).
        `follow`: the caller streams the new run (`follow(subscription=...)`): when this process
        starts it, it subscribes to its events before the run's task exists, so the stream needs
        no database read to begin (under load, a read waits for a pooled connection behind the
        turns' work, and the first token with it)."""
        if message is not None:
            self._check_message(message)
            if not message.strip():
                raise InvalidRequest("the message is empty")
        if idempotency_key is not None and not 0 < len(idempotency_key) <= 200:
            raise InvalidRequest("an idempotency key has 1 to 200 characters")
        start_here = start_here and self.runs_turns
        turn = _Turn(
            thread_id=thread_id,
            message=message,
            trigger=trigger,
            user=user,
            multitask=multitask,
            idempotency_key=idempotency_key,
            policy=policy,
            direct=direct,
        )
        try:
            run, created, claim, interrupted = await self._store_turn(turn, claim=start_here)
        except IntegrityError:
            if not start_here:
                raise
            # The claim lost to the unique index (another process started a run of this thread
            # after this transaction looked): everything was rolled back. Stored again, queued;
            # the race is rare, and a savepoint around every claim cost two round trips a turn.
            run, created, claim, interrupted = await self._store_turn(turn, claim=False)
        if interrupted is not None:
            self.runner.signal_cancel(interrupted)  # stops now if it runs here (else: CancelWatch)
        started, subscription = None, None
        if created and start_here:
            if follow and claim:
                subscription = self.bus.subscribe(run.id, parts=True)
            # Not claimed (the thread is busy): run_now tries again (once the interrupted run
            # has stopped), else a worker takes it.
            work = self.runner.run_claim(claim) if claim else self._run_after(interrupted, run.id)
            started = asyncio.create_task(work, name=f"run:{run.id}")
            self._keep(started)
        elif created and self.worker is not None:
            self.worker.wake()
        return Submission(run=run, created=created, started=started, subscription=subscription)

    async def _store_turn(
        self, turn: _Turn, *, claim: bool
    ) -> tuple[RunRecord, bool, Claim | None, str | None]:
        """`submit`'s transaction: the checks, the new run, and (`claim`) its claim, without a
        savepoint (a lost race raises IntegrityError and rolls the whole transaction back).
        The run, whether it is new, the claim, and the run it interrupted."""
        thread_id, user, multitask, now = turn.thread_id, turn.user, turn.multitask, self.now()
        interrupted: str | None = None
        active: RunRecord | None = None
        async with self.database.write() as conn:
            thread = await thread_store.get_thread(conn, thread_id)
            if thread is None:
                raise NotFound(f"thread {thread_id!r} does not exist")
            # Read once for the checks, the policy and the claim below (`turn_reads.py`).
            reads = await read_turn(
                conn,
                self.settings,
                agent_id=thread.agent_id,
                user=user,
                day=now.date().isoformat(),
            )
            if turn.idempotency_key is None or not await run_store.find_by_key(
                conn, thread_id, turn.idempotency_key
            ):
                # Before anything is stored.
                await refuse_if_disabled(conn, self.settings, reads=reads)
                active = await run_store.active_run(conn, thread_id)
                if active is not None and multitask is Multitask.REJECT:
                    raise Conflict(
                        f"thread {thread_id} is busy with run {active.id} ({active.status.value})"
                    )
                if turn.direct is None:
                    await check_cooldown(
                        conn, self.settings, user=user, trigger=turn.trigger, now=now
                    )
                # 429 while a budget is spent.
                await refuse_new_turn(conn, self.runner, user=user, reads=reads)
                if active is not None and multitask is Multitask.INTERRUPT:
                    await run_store.request_cancel(
                        conn, active.id, now=now, ended=cancelled_transcript
                    )
                    interrupted = active.id
            request = RunRequest(
                trigger=turn.trigger,
                message=turn.message,
                requesting_user=user,
                execution_user=user,
                policy=turn.policy,
                idempotency_key=turn.idempotency_key,
                multitask=multitask,
                checkpoint=turn.direct,
            )
            run, created = await enqueue_run(
                conn,
                thread,
                request,
                now=now,
                max_attempts=self.settings.max_attempts,
                reads=reads,
            )
            taken = None
            # A busy thread's new run is not next: no claim to try.
            if created and claim and active is None:
                taken = await self.runner.claimer.claim_in(
                    conn, run.id, savepoint=False, reads=reads
                )
        return run, created, taken, interrupted

    async def call_action(
        self,
        action: str,
        params: dict[str, Any],
        *,
        user: str | None,
        trigger: Trigger = Trigger.MCP,
        thread_id: str | None = None,
        idempotency_key: str | None = None,
        start_here: bool = True,
    ) -> Submission:
        """Run one action directly (an MCP client's tool call): a run on the thread (a new one
        if none is given) that passes the call through the executor under `trigger`'s policy
        (approval, budget, ledger, events) and ends with its result, no model involved."""
        if self.registry.get(action) is None:
            await self.mcp_tools.refresh()  # an outside server's tool, not listed here yet
        spec = self.registry.get(action)
        if spec is None:
            raise NotFound(f"no action is named {action!r}")
        start = direct_call(spec, params, user=user, trigger=trigger)
        if thread_id is None:
            thread_id = (await self.create_thread(title=start.title, created_by=user)).id
        return await self.submit(
            thread_id,
            start.message,
            trigger=trigger,
            user=user,
            idempotency_key=idempotency_key,
            start_here=start_here,
            direct=start.checkpoint,
        )

    async def spawn(
        self,
        thread_id: str,
        message: str,
        *,
        wait: bool = False,
        user: str | None = None,
        idempotency_key: str | None = None,
        title: str = "",
    ) -> Spawned:
        """Start a child agent on a new thread under `thread_id` (`POST /v1/threads/{id}/spawn`)."""
        self._check_message(message)
        await self.check_enabled()
        spawned = await self.spawner.spawn_child(
            thread_id, message, wait=wait, title=title, key=idempotency_key, user=user
        )
        self._queued(spawned.run.id)
        return spawned

    def _check_message(self, message: str) -> None:
        if len(message) > self.settings.max_message_chars:
            raise PayloadTooLarge(
                f"the message has {len(message)} characters; the limit is "
                f"{self.settings.max_message_chars} (PRESSLOOP_MAX_MESSAGE_CHARS)"
            )

    async def check_enabled(self) -> None:
        """Raise `AgentDisabled` while the kill switch is on (before a command stores anything:
        `pressloop chat` asks before it makes a thread)."""
        async with self.database.read() as conn:
            await refuse_if_disabled(conn, self.settings)

    async def decide(
        self,
        approval_id: str,
        *,
        approve: bool,
        by: str | None,
        note: str | None = None,
        params: dict[str, Any] | None = None,
    ) -> ApprovalRecord:
        """Approve (optionally with edited params) or reject; the run resumes either way."""
        if params is not None:  # checked against the action's model: an outside tool's too
            action = (await self.approvals.get(approval_id)).action
            if self.registry.get(action) is None and "." in action:
                await self.mcp_tools.refresh()
        decided = await self.approvals.decide(
            approval_id, approve=approve, by=by, note=note, params=params
        )
        self._queued(decided.run_id)
        return decided

    async def undo(self, entry_id: int, *, by: str | None) -> dict[str, Any]:
        return await self.undoer.undo(entry_id, by=by)

    async def run_now(self, run_id: str) -> RunRecord | None:
        """Claim this run here and run it, if it is runnable now (else a worker will)."""
        claim = await self.runner.claimer.claim(run_id)
        if claim is None and self.runner.runs_here(run_id):
            return None  # this process's worker took it first
        if claim is None:
            # Perhaps a crashed process still holds the thread: free expired leases, try again.
            async with self.database.write() as conn:
                reclaimed = await claim_store.reclaim_expired_runs(conn, now=self.now())
            count_reclaimed(self.metrics, reclaimed)
            claim = await self.runner.claimer.claim(run_id)
        if claim is None:
            return None
        return await self.runner.run_claim(claim)

    async def _run_after(self, interrupted: str | None, run_id: str) -> RunRecord | None:
        """Run `run_id` here once the run it interrupts has stopped (within a second when it
        runs anywhere; PRESSLOOP_CANCEL_WAIT at most), so the new message starts at once."""
        if interrupted is not None and self.settings.cancel_wait_s > 0:
            await self.wait(interrupted, timeout_s=self.settings.cancel_wait_s)
        return await self.run_now(run_id)

    def start_run_soon(self, run_id: str) -> None:
        if self.runs_turns:
            self._keep(asyncio.create_task(self.run_now(run_id), name=f"run:{run_id}"))

    async def cancel(self, run_id: str) -> RunRecord:
        """Cancel a queued or paused run at once; stop a running one, wherever it runs, and
        answer once it has (or after PRESSLOOP_CANCEL_WAIT, still `running` while it stops)."""
        async with self.database.write() as conn:
            run = await run_store.request_cancel(
                conn, run_id, now=self.now(), ended=cancelled_transcript
            )
        if run is None:
            raise NotFound(f"run {run_id!r} does not exist")
        self.runner.signal_cancel(run_id)
        self.bus.notify(run_id)
        if run.status is RunStatus.RUNNING and self.settings.cancel_wait_s > 0:
            return await self.wait(run_id, timeout_s=self.settings.cancel_wait_s)
        return run

    async def requeue(self, run_id: str) -> RunRecord:
        run = await self.get_run(run_id)
        if run.status not in (RunStatus.DEAD, RunStatus.FAILED, RunStatus.TIMED_OUT):
            raise Conflict(
                f"run {run_id} is {run.status.value}; only dead, failed or timed-out "
                "runs can be requeued"
            )
        async with self.database.write() as conn:
            requeued = await run_store.requeue(conn, run_id, now=self.now())
        assert requeued is not None
        self._queued(run_id)
        return requeued

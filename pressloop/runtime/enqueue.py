"""Queueing a run: the one way a message, a heartbeat, a spawn or a wake-up becomes a run.

Every caller does its own checks first (the kill switch, the cooldown, the budgets, a busy
thread, a spawn's limits), in its own transaction, then hands the request here, in that same
transaction: the run's policy is resolved from the layers that apply *now* (built-in -> site ->
agent -> thread -> request, `site_policies.resolve_run_policy`), the run is stored, and the
thread is marked as active. An idempotency key already used on the thread gives back that run,
not a new one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy.ext.asyncio import AsyncConnection

from pressloop.contracts import Checkpoint, Multitask, Trigger
from pressloop.runtime.site_policies import resolve_run_policy
from pressloop.runtime.turn_reads import TurnReads
from pressloop.store import agents as agent_store
from pressloop.store import runs as run_store
from pressloop.store import threads as thread_store
from pressloop.store.records import RunRecord, ThreadRecord


@dataclass(kw_only=True, frozen=True)
class RunRequest:
    """What is asked of a new run on a thread."""

    trigger: Trigger
    message: str | None  # a heartbeat may have none of its own
    requesting_user: str | None = None
    execution_user: str | None = None
    # The request layer of the policy: it only tightens what the thread's trigger allows.
    policy: Mapping[str, Any] | None = None
    idempotency_key: str | None = None
    multitask: Multitask = Multitask.ENQUEUE
    # Where the run's turn starts (e.g. its opening message marked untrusted).
    checkpoint: Checkpoint | None = None
    # The agent that runs it, when not the thread's: a schedule names its own agent (the
    # default one unless told), whichever agent its thread was made for.
    agent_id: str | None = None


class Enqueued(NamedTuple):
    run: RunRecord
    created: bool  # False: the idempotency key gave back an earlier run


async def enqueue_run(
    conn: AsyncConnection,
    thread: ThreadRecord,
    request: RunRequest,
    *,
    now: datetime,
    max_attempts: int,
    reads: TurnReads | None = None,
) -> Enqueued:
    """Queue `request` as a run on `thread`, in the caller's transaction. `reads`: the agent
    and the site's settings as this transaction read them already."""
    agent_id = request.agent_id or thread.agent_id
    if reads is not None and reads.agent_id == agent_id:
        agent = reads.agent
    else:
        agent = await agent_store.get_agent(conn, agent_id)
    policy = await resolve_run_policy(
        conn,
        request.trigger,
        agent=agent.policy if agent else None,
        thread=thread.metadata.get("policy"),
        request=request.policy,
        stored=reads.stored if reads is not None else None,  # the site's, whatever the agent
    )
    run, created = await run_store.create_run(
        conn,
        thread_id=thread.id,
        agent_id=agent_id,
        trigger=request.trigger,
        input=request.message,
        policy=policy,
        now=now,
        requesting_user=request.requesting_user,
        execution_user=request.execution_user,
        multitask=request.multitask.value,
        max_attempts=max_attempts,
        idempotency_key=request.idempotency_key,
        checkpoint=request.checkpoint,
    )
    if created:
        await thread_store.touch_thread(conn, thread.id, now=now)
    return Enqueued(run=run, created=created)

"""Store tests' runs: queued, each on a new thread of the default agent."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncConnection

from pressloop.contracts import Policy, Trigger
from pressloop.store import agents as agent_store
from pressloop.store import runs as run_store
from pressloop.store import threads as thread_store
from pressloop.store.records import RunRecord


async def queue_runs(
    conn: AsyncConnection, count: int, *, now: datetime, max_attempts: int = 5
) -> list[RunRecord]:
    """`count` runs queued at `now` ("turn 0", "turn 1"...), each on a thread of its own."""
    agent = await agent_store.ensure_agent(conn, now=now)
    queued = []
    for n in range(count):
        thread = await thread_store.create_thread(conn, agent_id=agent.id, now=now)
        run, _created = await run_store.create_run(
            conn,
            thread_id=thread.id,
            agent_id=agent.id,
            trigger=Trigger.API,
            input=f"turn {n}",
            policy=Policy(),
            now=now,
            max_attempts=max_attempts,
        )
        queued.append(run)
    return queued


async def queue_on(
    conn: AsyncConnection,
    thread_id: str,
    agent_id: str,
    *,
    now: datetime,
    trigger: Trigger = Trigger.API,
    due_in_s: float = 0.0,
) -> RunRecord:
    """One run queued on this thread at `now`, due `due_in_s` later."""
    run, _created = await run_store.create_run(
        conn,
        thread_id=thread_id,
        agent_id=agent_id,
        trigger=trigger,
        input="next",
        policy=Policy(),
        now=now,
        not_before=now + timedelta(seconds=due_in_s),
    )
    return run

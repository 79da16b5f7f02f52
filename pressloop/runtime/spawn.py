"""Spawned agents: a child thread with a seed message, the `spawned` policy and a queued run.

Limits (DESIGN.md section 9): depth <= 2 below the root thread and <= 5 live children per parent.
The same idempotency key gives the same child; with another message it is refused (422), as a
run's is. When a child's run ends, its result goes back to the parent (`reports.py`): as a
`wake` run if the parent asked to wait, else as a message in the parent's thread, after the
turn that spawned it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from pressloop.clock import Now
from pressloop.contracts import ActionContext, Trigger
from pressloop.errors import Conflict, InvalidRequest, NotFound
from pressloop.runtime.enqueue import RunRequest, enqueue_run
from pressloop.store import runs as run_store
from pressloop.store import threads as thread_store
from pressloop.store.db import Database
from pressloop.store.records import RunRecord, ThreadRecord

MAX_DEPTH = 2
MAX_LIVE_CHILDREN = 5


@dataclass(kw_only=True)
class Spawned:
    thread: ThreadRecord
    run: RunRecord
    created: bool

    def public(self) -> dict[str, Any]:
        return {"thread_id": self.thread.id, "run_id": self.run.id, "status": self.run.status}


class Spawner:
    def __init__(self, database: Database, now: Now, *, max_attempts: int) -> None:
        self.database = database
        self.now = now
        self.max_attempts = max_attempts

    async def spawn_child(
        self,
        parent_thread_id: str,
        message: str,
        *,
        wait: bool = False,
        title: str = "",
        key: str | None = None,
        parent_run_id: str | None = None,
        parent_trigger: Trigger = Trigger.API,
        user: str | None = None,
    ) -> Spawned:
        now = self.now()
        async with self.database.write() as conn:
            parent = await thread_store.get_thread(conn, parent_thread_id)
            if parent is None:
                raise NotFound(f"thread {parent_thread_id!r} does not exist")
            seed_key = f"spawn:{parent.id}:{key}" if key else None
            if seed_key is not None:
                existing = await _spawned_by_key(conn, seed_key)
                if existing is not None and existing.run.input != message:
                    raise InvalidRequest(
                        f"the idempotency key {key!r} was already used on this thread for "
                        f"another message (child thread {existing.thread.id})"
                    )
                if existing is not None:
                    return existing
            if parent.depth + 1 > MAX_DEPTH:
                raise Conflict(
                    f"cannot spawn from thread {parent.id}: spawned agents may be at most "
                    f"{MAX_DEPTH} levels deep"
                )
            if await run_store.count_children_with_live_runs(conn, parent.id) >= MAX_LIVE_CHILDREN:
                raise Conflict(
                    f"cannot spawn from thread {parent.id}: it already has "
                    f"{MAX_LIVE_CHILDREN} live children; wait for one to finish"
                )
            child = await thread_store.create_thread(
                conn,
                agent_id=parent.agent_id,
                now=now,
                title=title or message[:80],
                created_by=user or f"thread:{parent.id}",
                parent_id=parent.id,
                depth=parent.depth + 1,
                metadata={
                    "wait": wait,
                    "parent_run_id": parent_run_id,
                    "parent_trigger": parent_trigger.value,
                },
            )
            # A new child thread has no policy of its own: the run gets the agent's `spawned`
            # policy.
            seed = RunRequest(
                trigger=Trigger.SPAWNED,
                message=message,
                requesting_user=user,
                execution_user=user,
                idempotency_key=seed_key,
            )
            run, _ = await enqueue_run(conn, child, seed, now=now, max_attempts=self.max_attempts)
        return Spawned(thread=child, run=run, created=True)

    async def spawn(
        self, context: ActionContext, *, message: str, wait: bool, title: str, key: str
    ) -> dict[str, Any]:
        """The `spawn_agent` action's port."""
        spawned = await self.spawn_child(
            context.thread_id,
            message,
            wait=wait,
            title=title,
            key=key,
            parent_run_id=context.run_id,
            parent_trigger=context.trigger,
            user=context.requesting_user,
        )
        return spawned.public()


async def _spawned_by_key(conn: AsyncConnection, seed_key: str) -> Spawned | None:
    """The child an earlier spawn with this key made (its seed run carries the key)."""
    run = await run_store.find_by_key_on_any_thread(conn, seed_key)
    if run is None:
        return None
    thread = await thread_store.get_thread(conn, run.thread_id)
    assert thread is not None
    return Spawned(thread=thread, run=run, created=False)

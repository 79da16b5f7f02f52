"""A finished child's report to its parent thread, after the turn that spawned it (DESIGN.md 9).

A child its parent does not wait for reports as a message in the parent's thread. That message
must come after the parent turn that spawned the child, and the child may end first (the parent
turn still runs, or waits for an approval). The order is kept by the data, under the lock of the
parent run's row, not by timing:
- a child's finish locks its parent run's row: a parent run that has ended gets the report now,
  one still live gets nothing yet;
- a parent run's finish (its row locked by its own update) posts the reports of the children it
  spawned that ended before it, after its own transcript.
Whichever commits second sees the other's commit, so one of them posts; a report message
carries the child run's id, so it is never posted twice.

A child its parent waits for wakes the parent: a `wake` run queued on the parent's thread, which
a thread only starts after the run before it (the parent's) has ended. Its policy is no looser
than the parent run's: field by field the stricter of the `wake` profile and the parent run's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from pressloop.contracts import (
    FINAL_RUN_STATUSES,
    Checkpoint,
    Message,
    Role,
    RunStatus,
    StepStatus,
    Trigger,
    TurnResult,
)
from pressloop.engine.taint import UNTRUSTED_PREFIX
from pressloop.runtime.enqueue import RunRequest, enqueue_run
from pressloop.runtime.site_policies import caller_request
from pressloop.store import runs as run_store
from pressloop.store import threads as thread_store
from pressloop.store.records import RunRecord, ThreadRecord

REPORTER = "spawned_agent"  # the `name` of a report message in the parent's thread
SPAWN_ACTION = "spawn_agent"

Operation = Callable[[AsyncConnection], Awaitable[str | None]]


def child_report(thread: ThreadRecord, status: RunStatus, result: TurnResult) -> str:
    """What the parent is told; a child that had untrusted text in front of it reports
    untrusted text (its answer may follow instructions it read)."""
    outcome = result.assistant_text or (result.error.message if result.error else "")
    report = f"[spawned agent {thread.id} finished: {status.value}]\n{outcome}".strip()
    return UNTRUSTED_PREFIX + report if result.untrusted else report


def after_finish(
    run: RunRecord, status: RunStatus, result: TurnResult, *, now: datetime, max_attempts: int
) -> Operation | None:
    """What a run's finish does for spawned agents, in its own transaction (None: nothing):
    a child reports to its parent; a parent posts the reports its children held for it.
    The operation returns the id of a wake-up run it queued, if any."""
    if status not in FINAL_RUN_STATUSES:
        return None
    is_child = run.trigger is Trigger.SPAWNED
    spawned = any(
        s.action == SPAWN_ACTION and s.status is StepStatus.SUCCEEDED for s in result.steps
    )
    if not is_child and not spawned:
        return None

    async def operation(conn: AsyncConnection) -> str | None:
        if spawned:
            await post_held_reports(conn, run, now=now)
        if not is_child:
            return None
        return await report_to_parent(conn, run, status, result, now=now, max_attempts=max_attempts)

    return operation


async def report_to_parent(
    conn: AsyncConnection,
    run: RunRecord,
    status: RunStatus,
    result: TurnResult,
    *,
    now: datetime,
    max_attempts: int,
) -> str | None:
    """A finished child's report: a wake-up run (its id), or a message now, or held for the
    parent run's finish while that run is live."""
    thread = await thread_store.get_thread(conn, run.thread_id)
    if thread is None or thread.parent_id is None:
        return None
    if thread.metadata.get("wait"):
        return await _wake_parent(conn, thread, run.id, status, result, now, max_attempts)
    if await _live(conn, thread.metadata.get("parent_run_id")):
        return None  # the parent run's finish posts it (`post_held_reports`)
    await _post(conn, thread, run.id, status, result, now)
    return None


async def post_held_reports(conn: AsyncConnection, parent_run: RunRecord, *, now: datetime) -> None:
    """Post, after the parent run's transcript, the reports of the children it spawned (not
    waited for) that ended before it."""
    children = await thread_store.list_threads(conn, parent_id=parent_run.thread_id, limit=1000)
    for child in children:
        meta = child.metadata
        if meta.get("parent_run_id") != parent_run.id or meta.get("wait"):
            continue
        for ended in await run_store.ended_runs(conn, child.id, trigger=Trigger.SPAWNED):
            if ended.result is not None:
                await _post(conn, child, ended.id, ended.status, ended.result, now)


async def _live(conn: AsyncConnection, parent_run_id: str | None) -> bool:
    """Whether the parent run has yet to end; its row stays locked until this commits."""
    if not parent_run_id:
        return False
    status = await run_store.run_status(conn, parent_run_id, lock=True)
    return status is not None and status not in FINAL_RUN_STATUSES


async def _post(
    conn: AsyncConnection,
    child: ThreadRecord,
    child_run_id: str,
    status: RunStatus,
    result: TurnResult,
    now: datetime,
) -> None:
    assert child.parent_id is not None
    if await thread_store.has_message_of_run(conn, child.parent_id, child_run_id):
        return
    report = Message(
        role=Role.USER,
        name=REPORTER,
        content=child_report(child, status, result),
        untrusted=result.untrusted,
    )
    await thread_store.append_messages(
        conn, child.parent_id, [report], now=now, run_id=child_run_id
    )
    await thread_store.touch_thread(conn, child.parent_id, now=now)


async def _wake_parent(
    conn: AsyncConnection,
    thread: ThreadRecord,
    child_run_id: str,
    status: RunStatus,
    result: TurnResult,
    now: datetime,
    max_attempts: int,
) -> str:
    assert thread.parent_id is not None
    parent = await thread_store.get_thread(conn, thread.parent_id)
    assert parent is not None  # threads.parent_id references a thread; threads are never deleted
    report = child_report(thread, status, result)
    wake = RunRequest(
        trigger=Trigger.WAKE,
        message=report,
        requesting_user=f"thread:{thread.id}",
        policy=await _parent_policy(conn, thread),
        idempotency_key=f"child-done:{child_run_id}",
        # The report opens the parent's turn as a message that keeps its mark.
        checkpoint=Checkpoint(messages=[Message(role=Role.USER, content=report, untrusted=True)])
        if result.untrusted
        else None,
    )
    run, _ = await enqueue_run(conn, parent, wake, now=now, max_attempts=max_attempts)
    return run.id


async def _parent_policy(conn: AsyncConnection, child: ThreadRecord) -> dict[str, Any] | None:
    """The request layer of a wake-up run, which keeps it no looser than the parent: the policy
    of the parent run that spawned the child (or, spawned over the API, the parent's trigger's
    policy on the parent's thread)."""
    assert child.parent_id is not None
    parent_run_id = child.metadata.get("parent_run_id")
    parent_run = await run_store.get_run(conn, parent_run_id) if parent_run_id else None
    if parent_run is not None:
        return parent_run.policy.model_dump(mode="json")
    trigger = Trigger(child.metadata.get("parent_trigger", Trigger.API.value))
    return await caller_request(conn, child.parent_id, trigger)

"""Runs: create (idempotent), read, retry, cancel; claiming them is `store/claims.py`, finishing
them `store/run_finish.py`.

Every function takes an open transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from pressloop.contracts import (
    FINAL_RUN_STATUSES,
    Checkpoint,
    ErrorInfo,
    Message,
    Policy,
    RunStatus,
    Trigger,
    TurnResult,
    Usage,
)
from pressloop.store import threads as thread_store
from pressloop.store.id_lists import among
from pressloop.store.ids import new_id
from pressloop.store.records import RunRecord
from pressloop.store.schema import runs, threads

# Runs looked up per statement when a process looks for cancels (well under SQLite's limit of
# bound parameters).
_CANCEL_BATCH = 500
# A thread is busy while one of its runs is running or paused on an approval.
BUSY_STATUSES = (RunStatus.RUNNING.value, RunStatus.WAITING_APPROVAL.value)
# A run is live until it ends: queued, running or paused on an approval.
LIVE_STATUSES = (RunStatus.QUEUED.value, *BUSY_STATUSES)
_FINAL_STATUSES = [status.value for status in FINAL_RUN_STATUSES]


def to_record(row: sa.Row[Any]) -> RunRecord:
    m = row._mapping
    return RunRecord(
        id=m["id"],
        thread_id=m["thread_id"],
        agent_id=m["agent_id"],
        trigger=Trigger(m["trigger"]),
        status=RunStatus(m["status"]),
        input=m["input"],
        requesting_user=m["requesting_user"],
        execution_user=m["execution_user"],
        policy=Policy.model_validate(m["policy"]),
        multitask=m["multitask"],
        attempt=m["attempt"],
        max_attempts=m["max_attempts"],
        not_before=m["not_before"],
        lease_owner=m["lease_owner"],
        lease_token=m["lease_token"],
        lease_expires_at=m["lease_expires_at"],
        idempotency_key=m["idempotency_key"],
        checkpoint=Checkpoint.model_validate(m["checkpoint"]) if m["checkpoint"] else None,
        result=TurnResult.model_validate(m["result"]) if m["result"] else None,
        usage=Usage.model_validate(m["usage"] or {}),
        error=ErrorInfo.model_validate(m["error"]) if m["error"] else None,
        cancel_requested=bool(m["cancel_requested"]),
        event_seq=m["event_seq"],
        trace_context=m["trace_context"],
        created_at=m["created_at"],
        started_at=m["started_at"],
        finished_at=m["finished_at"],
        updated_at=m["updated_at"],
    )


# Statements of every turn, built once (store/db.py). The insert's columns are those of its
# parameters; without an idempotency key, the conflict clause never applies (NULLs differ).
_INSERT = {
    name: dialect.insert(runs)
    .on_conflict_do_nothing(index_elements=["thread_id", "idempotency_key"])
    .returning(*runs.c)
    for name, dialect in (("postgresql", postgresql), ("sqlite", sqlite))
}
_BY_ID = sa.select(runs).where(runs.c.id == sa.bindparam("b_id"))
_BY_KEY = sa.select(runs).where(
    runs.c.thread_id == sa.bindparam("b_thread"), runs.c.idempotency_key == sa.bindparam("b_key")
)
_ACTIVE = (
    sa.select(runs)
    .where(runs.c.thread_id == sa.bindparam("b_thread"), runs.c.status.in_(BUSY_STATUSES))
    .limit(1)
)


async def create_run(
    conn: AsyncConnection,
    *,
    thread_id: str,
    agent_id: str,
    trigger: Trigger,
    input: str | None,
    policy: Policy,
    now: datetime,
    requesting_user: str | None = None,
    execution_user: str | None = None,
    multitask: str = "enqueue",
    max_attempts: int = 5,
    idempotency_key: str | None = None,
    not_before: datetime | None = None,
    checkpoint: Checkpoint | None = None,
) -> tuple[RunRecord, bool]:
    """Queue a run; with an idempotency key already used on this thread, return that run.
    `checkpoint`: where its turn starts (e.g. its input message marked untrusted)."""
    run_id = new_id("run")
    values = {
        "id": run_id,
        "thread_id": thread_id,
        "agent_id": agent_id,
        "trigger": trigger.value,
        "status": RunStatus.QUEUED.value,
        "input": input,
        "requesting_user": requesting_user,
        "execution_user": execution_user,
        "policy": policy.model_dump(mode="json"),
        "multitask": multitask,
        "max_attempts": max_attempts,
        "not_before": not_before or now,
        "idempotency_key": idempotency_key,
        "usage": Usage().model_dump(),
        "created_at": now,
        "updated_at": now,
    }
    if checkpoint is not None:
        values["checkpoint"] = checkpoint.model_dump(mode="json")
    row = (await conn.execute(_INSERT[conn.dialect.name], values)).one_or_none()
    if row is not None:
        return to_record(row), True
    assert idempotency_key is not None
    record = await find_by_key(conn, thread_id, idempotency_key)
    assert record is not None
    return record, False


async def get_run(conn: AsyncConnection, run_id: str) -> RunRecord | None:
    row = (await conn.execute(_BY_ID, {"b_id": run_id})).one_or_none()
    return to_record(row) if row else None


async def find_by_key(conn: AsyncConnection, thread_id: str, key: str) -> RunRecord | None:
    row = (await conn.execute(_BY_KEY, {"b_thread": thread_id, "b_key": key})).one_or_none()
    return to_record(row) if row else None


async def find_by_key_on_any_thread(conn: AsyncConnection, key: str) -> RunRecord | None:
    """A run with this idempotency key on whichever thread (a spawned child's seed run, whose
    thread is not known before it is found)."""
    query = sa.select(runs).where(runs.c.idempotency_key == key).limit(1)
    row = (await conn.execute(query)).one_or_none()
    return to_record(row) if row else None


async def run_status(conn: AsyncConnection, run_id: str, *, lock: bool = False) -> RunStatus | None:
    """The run's status (None: no such run). `lock`: keep the run's row locked until the
    transaction ends (PostgreSQL; SQLite serialises writers anyway)."""
    query = sa.select(runs.c.status).where(runs.c.id == run_id)
    if lock:
        query = query.with_for_update()
    status = (await conn.execute(query)).scalar_one_or_none()
    return RunStatus(status) if status is not None else None


async def ended_runs(conn: AsyncConnection, thread_id: str, *, trigger: Trigger) -> list[RunRecord]:
    """The thread's runs of `trigger` that have ended (a final status)."""
    query = sa.select(runs).where(
        runs.c.thread_id == thread_id,
        runs.c.trigger == trigger.value,
        runs.c.status.in_(_FINAL_STATUSES),
    )
    return [to_record(row) for row in (await conn.execute(query)).all()]


async def count_children_with_live_runs(conn: AsyncConnection, parent_thread_id: str) -> int:
    """How many child threads of this thread have a live run (spawned agents still at work)."""
    query = (
        sa.select(sa.func.count(sa.distinct(threads.c.id)))
        .select_from(threads.join(runs, runs.c.thread_id == threads.c.id))
        .where(threads.c.parent_id == parent_thread_id, runs.c.status.in_(LIVE_STATUSES))
    )
    return int((await conn.execute(query)).scalar_one())


async def last_run_created_at(
    conn: AsyncConnection, *, requesting_user: str, triggers: Sequence[str]
) -> datetime | None:
    """When `requesting_user` last asked for a run of one of `triggers` (None: never)."""
    query = sa.select(sa.func.max(runs.c.created_at)).where(
        runs.c.requesting_user == requesting_user, runs.c.trigger.in_(list(triggers))
    )
    last: datetime | None = (await conn.execute(query)).scalar_one()
    if last is not None and last.tzinfo is None:
        # SQLite's max() gives the stored value back without its type (and its zone).
        last = last.replace(tzinfo=UTC)
    return last


async def next_event_seq(conn: AsyncConnection, run_id: str) -> int:
    """Take the run's next event number outside a lease (an event added to a run that has
    ended, such as an undo); the row's lock orders it with any other writer."""
    query = (
        sa.update(runs)
        .where(runs.c.id == run_id)
        .values(event_seq=runs.c.event_seq + 1)
        .returning(runs.c.event_seq)
    )
    return int((await conn.execute(query)).scalar_one())


async def list_runs(
    conn: AsyncConnection,
    *,
    thread_id: str | None = None,
    status: RunStatus | None = None,
    limit: int = 50,
) -> list[RunRecord]:
    query = sa.select(runs).order_by(runs.c.created_at.desc(), runs.c.id.desc()).limit(limit)
    if thread_id is not None:
        query = query.where(runs.c.thread_id == thread_id)
    if status is not None:
        query = query.where(runs.c.status == status.value)
    return [to_record(row) for row in (await conn.execute(query)).all()]


async def active_run(conn: AsyncConnection, thread_id: str) -> RunRecord | None:
    """The run that keeps this thread busy now, if any."""
    row = (await conn.execute(_ACTIVE, {"b_thread": thread_id})).one_or_none()
    return to_record(row) if row else None


async def pending_run(conn: AsyncConnection, thread_id: str, trigger: Trigger) -> RunRecord | None:
    """A queued run of this trigger on the thread (heartbeats keep at most one pending)."""
    row = (
        await conn.execute(
            sa.select(runs)
            .where(
                runs.c.thread_id == thread_id,
                runs.c.trigger == trigger.value,
                runs.c.status == RunStatus.QUEUED.value,
            )
            .limit(1)
        )
    ).one_or_none()
    return to_record(row) if row else None


async def request_cancel(
    conn: AsyncConnection,
    run_id: str,
    *,
    now: datetime,
    ended: Callable[[RunRecord], Sequence[Message]] | None = None,
) -> RunRecord | None:
    """Cancel a queued or paused run at once; flag a running one (the process running it stops
    it within a second: `runtime/interrupt.py`, `runtime/cancel_watch.py`).
    `ended(run)`: the messages a run cancelled at once leaves in its thread (its transcript so
    far and Pressloop's notice, `runtime/notices.py`)."""
    run = await get_run(conn, run_id)
    if run is None:
        return None
    if run.status in (RunStatus.QUEUED, RunStatus.WAITING_APPROVAL):
        done = await conn.execute(
            sa.update(runs)
            .where(runs.c.id == run_id, runs.c.status == run.status.value)
            .values(status=RunStatus.CANCELLED.value, finished_at=now, updated_at=now)
        )
        if done.rowcount and ended is not None:
            await thread_store.append_messages(
                conn, run.thread_id, ended(run), now=now, run_id=run_id
            )
    elif run.status == RunStatus.RUNNING:
        await conn.execute(
            sa.update(runs).where(runs.c.id == run_id).values(cancel_requested=True, updated_at=now)
        )
    return await get_run(conn, run_id)


async def cancels_requested(conn: AsyncConnection, run_ids: Sequence[str]) -> list[str]:
    """Which of these runs a person asked to cancel (a process looking for cancels asked
    elsewhere for the runs it runs, `runtime/cancel_watch.py`)."""
    asked: list[str] = []
    for start in range(0, len(run_ids), _CANCEL_BATCH):
        batch = list(run_ids[start : start + _CANCEL_BATCH])
        query = sa.select(runs.c.id).where(among(conn, runs.c.id, batch), runs.c.cancel_requested)
        asked += list((await conn.execute(query)).scalars())
    return asked


async def requeue(conn: AsyncConnection, run_id: str, *, now: datetime) -> RunRecord | None:
    """Bring a dead, failed or timed-out run back to the queue with fresh attempts."""
    await conn.execute(
        sa.update(runs)
        .where(
            runs.c.id == run_id,
            runs.c.status.in_(
                [RunStatus.DEAD.value, RunStatus.FAILED.value, RunStatus.TIMED_OUT.value]
            ),
        )
        .values(
            status=RunStatus.QUEUED.value,
            attempt=0,
            not_before=now,
            finished_at=None,
            error=None,
            result=None,
            updated_at=now,
        )
    )
    return await get_run(conn, run_id)

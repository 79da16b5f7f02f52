"""The writes of many claimed runs in one transaction (the runtime's group commit).

Every run's share is fenced: its lease is renewed and its checkpoint stored only while its
token still holds the run. A run whose lease was lost is left out of the answer and nothing of it
is written; the other runs of the batch are not affected.
With many runs, each statement is sent once for all of them (executemany), so the cost of a
statement is shared by the batch. (On PostgreSQL the group commit fences with one statement
that also appends the events: `store/batch_writes.py`.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from pressloop.contracts import Event, Message, RunStatus
from pressloop.errors import LeaseLost
from pressloop.store import threads as thread_store
from pressloop.store.id_lists import among
from pressloop.store.schema import runs

# Executed with a list of parameter sets: the SET clause is the columns named in the sets.
_BY_TOKEN = sa.update(runs).where(
    runs.c.id == sa.bindparam("b_id"),
    runs.c.lease_token == sa.bindparam("b_token"),
    runs.c.status == RunStatus.RUNNING.value,
)
# One run: the update says whether it matched (built once, store/db.py).
_FENCE_ONE = _BY_TOKEN.returning(runs.c.cancel_requested)
_FINISH_ONE = _BY_TOKEN.returning(runs.c.id)


@dataclass(kw_only=True)
class FinishWrite:
    """A run leaving `running`: its row's new values (`run_finish.finish_values`) and the messages
    its turn adds to the thread."""

    values: dict[str, Any]
    at: datetime  # when the run finished: its messages' and its thread's time
    transcript: list[Message] = field(default_factory=list)


@dataclass(kw_only=True)
class RunWrite:
    run_id: str
    thread_id: str
    token: int
    event_seq: int  # the run's newest event number after this write
    events: list[Event] = field(default_factory=list)
    checkpoint: dict[str, Any] | None = None  # serialised
    finish: FinishWrite | None = None
    trace_context: dict[str, str] | None = None  # the run's trace, written once (first attempt)


async def fence_many(
    conn: AsyncConnection, writes: Sequence[RunWrite], *, now: datetime, ttl_s: float
) -> dict[str, bool]:
    """Renew the leases (storing checkpoints and event numbers) of the runs still held.

    Returns run id -> whether a person asked to cancel the run, for the runs held; a run
    missing from the answer lost its lease. A lone finishing write is not fenced here: its
    finish checks the token itself (`finish_many`) and raises if it no longer holds, which
    rolls back everything written for it before.
    """
    if len(writes) == 1:
        if writes[0].finish is not None:
            return {writes[0].run_id: False}
        return await _fence_one(conn, writes[0], now=now, ttl_s=ttl_s)
    expires = now + timedelta(seconds=ttl_s)
    # One executemany per set of columns written (with or without a checkpoint, a trace).
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for write in writes:
        params: dict[str, Any] = {
            "b_id": write.run_id,
            "b_token": write.token,
            "lease_expires_at": expires,
            "updated_at": now,
            "event_seq": write.event_seq,
        }
        if write.checkpoint is not None:
            params["checkpoint"] = write.checkpoint
        if write.trace_context is not None:
            params["trace_context"] = write.trace_context
        groups.setdefault(tuple(params), []).append(params)
    for group in groups.values():
        await conn.execute(_BY_TOKEN, group)
    # Which updates matched: a run our update matched is locked by this transaction, so its
    # row shows our token; any other row was not written.
    tokens = {write.run_id: write.token for write in writes}
    rows = await conn.execute(
        sa.select(runs.c.id, runs.c.lease_token, runs.c.status, runs.c.cancel_requested).where(
            among(conn, runs.c.id, tokens)
        )
    )
    return {
        row.id: bool(row.cancel_requested)
        for row in rows
        if row.lease_token == tokens[row.id] and row.status == RunStatus.RUNNING.value
    }


async def _fence_one(
    conn: AsyncConnection, write: RunWrite, *, now: datetime, ttl_s: float
) -> dict[str, bool]:
    values: dict[str, Any] = {
        "b_id": write.run_id,
        "b_token": write.token,
        "lease_expires_at": now + timedelta(seconds=ttl_s),
        "updated_at": now,
        "event_seq": write.event_seq,
    }
    if write.checkpoint is not None:
        values["checkpoint"] = write.checkpoint
    if write.trace_context is not None:
        values["trace_context"] = write.trace_context
    row = (await conn.execute(_FENCE_ONE, values)).one_or_none()
    return {} if row is None else {write.run_id: bool(row[0])}


async def finish_many(conn: AsyncConnection, writes: Sequence[RunWrite]) -> None:
    """Move runs out of `running`, append their transcripts and touch their threads.

    The runs were fenced in this transaction (`fence_many`), except a lone one, whose update
    checks its token and raises LeaseLost when it matches nothing.
    """
    finishing = [w for w in writes if w.finish is not None]
    if not finishing:
        return
    if len(finishing) == 1:
        await _finish_one(conn, finishing[0])
        return
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    rows: list[dict[str, Any]] = []
    touched: dict[str, datetime] = {}
    for write in finishing:
        finish = write.finish
        assert finish is not None
        groups.setdefault(tuple(sorted(finish.values)), []).append(
            {**finish.values, "b_id": write.run_id, "b_token": write.token}
        )
        rows += thread_store.message_rows(
            write.thread_id, finish.transcript, now=finish.at, run_id=write.run_id
        )
        touched[write.thread_id] = finish.at
    for group in groups.values():
        await conn.execute(_BY_TOKEN, group)
    await thread_store.append_message_rows(conn, rows)
    await thread_store.touch_threads(conn, touched)


async def _finish_one(conn: AsyncConnection, write: RunWrite) -> None:
    finish = write.finish
    assert finish is not None
    values = {**finish.values, "b_id": write.run_id, "b_token": write.token}
    matched = (await conn.execute(_FINISH_ONE, values)).one_or_none()
    if matched is None:
        raise LeaseLost(f"run {write.run_id}: the lease (token {write.token}) is no longer ours")
    await thread_store.append_messages(
        conn, write.thread_id, finish.transcript, now=finish.at, run_id=write.run_id
    )
    await thread_store.touch_thread(conn, write.thread_id, now=finish.at)

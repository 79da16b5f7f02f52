"""A group commit's common part: fence the batch's runs, append the events of those still held,
tell the other processes which runs have new events.

On SQLite these are the three steps they say (`run_writes.fence_many`, `events.append_events`;
SQLite has no notifications). On PostgreSQL they are one statement: the batch's values go as
one array parameter per column, `UPDATE ... FROM unnest(...) RETURNING` fences the runs, the
events' `INSERT ... SELECT` keeps the rows of the runs that update matched, and `pg_notify` names
those runs (delivered at the commit, never for a rolled-back one). Separately they were five
round trips in a transaction of seven (BEGIN, the update, the SELECT saying which runs matched,
the insert, the notification, COMMIT), each a reply the event loop must read while the first
tokens of hundreds of streams wait behind it (docs/benchmarks.md, section 3k). A batch with
nothing else to write (no run finishing, no operation) sends this one statement in autocommit:
one statement is one transaction, all or nothing, without BEGIN and COMMIT.

The text is the same whatever the batch's size, so each connection prepares it once. The
statement locks its tables before any row: one stuck behind a lock on `run_events` holds no run's
row meanwhile, so a lease it would renew can run out and the run go to its next attempt; when the
statement runs at last, its fence matches nothing of that run.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.asyncio import AsyncConnection

from pressloop.contracts import RunStatus
from pressloop.store import events as event_store
from pressloop.store import run_writes
from pressloop.store.notify import CHANNEL
from pressloop.store.run_writes import RunWrite
from pressloop.store.schema import ID, UTCDateTime

_TEXTS = postgresql.ARRAY(sa.Text)
_IDS = postgresql.ARRAY(ID)
_INTEGERS = postgresql.ARRAY(sa.Integer)

# JSON goes as text (serialised here, as SQLAlchemy's JSON type would) and is cast in the
# statement: a NULL element is "not written" (COALESCE keeps the stored value).
_FENCE_APPEND_NOTIFY = sa.text(
    """
    WITH fenced AS (
        UPDATE runs
        SET lease_expires_at = :expires,
            updated_at = :now,
            event_seq = w.seq,
            checkpoint = COALESCE(CAST(w.checkpoint AS JSONB), runs.checkpoint),
            trace_context = COALESCE(CAST(w.trace_context AS JSONB), runs.trace_context)
        FROM unnest(:run_ids, :tokens, :seqs, :checkpoints, :trace_contexts)
            AS w(id, token, seq, checkpoint, trace_context)
        WHERE runs.id = w.id AND runs.lease_token = w.token AND runs.status = :running
        RETURNING runs.id, runs.cancel_requested
    ),
    appended AS (
        INSERT INTO run_events (run_id, thread_id, seq, type, ts, data)
        SELECT e.run_id, e.thread_id, e.seq, e.type, e.ts, CAST(e.data AS JSONB)
        FROM unnest(:e_run_ids, :e_thread_ids, :e_seqs, :e_types, :e_times, :e_data)
            WITH ORDINALITY AS e(run_id, thread_id, seq, type, ts, data, n)
        WHERE e.run_id IN (SELECT id FROM fenced)
        ORDER BY e.n
        RETURNING run_id
    ),
    notified AS (
        SELECT pg_notify(:channel, run_id) FROM (SELECT DISTINCT run_id FROM appended) AS r
    )
    SELECT id, cancel_requested FROM fenced
    UNION ALL
    -- Read, so that the notifications are sent; the row itself is dropped.
    SELECT NULL, count(*) > 0 FROM notified
    """
).bindparams(
    sa.bindparam("expires", type_=UTCDateTime),
    sa.bindparam("now", type_=UTCDateTime),
    sa.bindparam("run_ids", type_=_IDS),
    sa.bindparam("tokens", type_=_INTEGERS),
    sa.bindparam("seqs", type_=_INTEGERS),
    sa.bindparam("checkpoints", type_=_TEXTS),
    sa.bindparam("trace_contexts", type_=_TEXTS),
    sa.bindparam("running", type_=sa.String),
    sa.bindparam("e_run_ids", type_=_IDS),
    sa.bindparam("e_thread_ids", type_=_IDS),
    sa.bindparam("e_seqs", type_=_INTEGERS),
    sa.bindparam("e_types", type_=_TEXTS),
    sa.bindparam("e_times", type_=postgresql.ARRAY(UTCDateTime)),
    sa.bindparam("e_data", type_=_TEXTS),
    sa.bindparam("channel", type_=sa.String),
)


async def fence_and_append(
    conn: AsyncConnection, writes: Sequence[RunWrite], *, now: datetime, ttl_s: float
) -> dict[str, bool]:
    """Fence `writes`' runs and append the events of those still held; on PostgreSQL, notify
    the other processes of the runs with new events (at the commit).

    Returns run id -> whether a person asked to cancel the run, for the runs held, as
    `run_writes.fence_many` does.
    """
    if conn.dialect.name != "postgresql":
        held = await run_writes.fence_many(conn, writes, now=now, ttl_s=ttl_s)
        events = [e for w in writes if w.run_id in held for e in w.events]
        await event_store.append_events(conn, events)
        return held
    events = [e for w in writes for e in w.events]
    rows = await conn.execute(
        _FENCE_APPEND_NOTIFY,
        {
            "expires": now + timedelta(seconds=ttl_s),
            "now": now,
            "running": RunStatus.RUNNING.value,
            "run_ids": [w.run_id for w in writes],
            "tokens": [w.token for w in writes],
            "seqs": [w.event_seq for w in writes],
            "checkpoints": [_json_or_none(w.checkpoint) for w in writes],
            "trace_contexts": [_json_or_none(w.trace_context) for w in writes],
            "e_run_ids": [e.run_id for e in events],
            "e_thread_ids": [e.thread_id for e in events],
            "e_seqs": [e.seq for e in events],
            "e_types": [e.type.value for e in events],
            "e_times": [e.ts for e in events],
            "e_data": [json.dumps(e.data) for e in events],
            "channel": CHANNEL,
        },
    )
    return {row.id: bool(row.cancel_requested) for row in rows if row.id is not None}


def _json_or_none(value: Any) -> str | None:
    return None if value is None else json.dumps(value)

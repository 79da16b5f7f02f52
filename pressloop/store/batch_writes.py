"""A group commit's common part: fence the batch's runs, append the events of those still held,
tell the other processes which runs have new events; with `finish`, also move the runs that
finish out of `running`, with their transcripts and their threads' time.

On SQLite these are the steps they say (`run_writes.fence_many`, `events.append_events`,
`run_writes.finish_many`; SQLite has no notifications). On PostgreSQL they are one statement:
the batch's values go as one array parameter per column, `UPDATE ... FROM unnest(...)
RETURNING` fences the runs (and finishes those that finish: a row is updated once a
statement), the events' `INSERT ... SELECT` keeps the rows of the runs that update matched,
and `pg_notify` names those runs (delivered at the commit, never for a rolled-back one).
Separately they were five round trips in a transaction of seven (BEGIN, the update, the SELECT
saying which runs matched, the insert, the notification, COMMIT), and a finish three more (the
runs' UPDATE, the messages' INSERT, the threads' UPDATE), each a reply the event loop must read
while the first tokens of hundreds of streams wait behind it (docs/benchmarks.md, sections 3k
and 3l). A batch with nothing else to write (no operation) sends this one statement in
autocommit: one statement is one transaction, all or nothing, without BEGIN and COMMIT.

Each of the two texts (with and without finishes) is the same whatever the batch's size, so each
connection prepares it once. The statement locks its tables before any row: one stuck behind a
lock on `run_events` holds no run's row meanwhile, so a lease it would renew can run out and the
run go to its next attempt; when the statement runs at last, its fence matches nothing of it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.asyncio import AsyncConnection

from pressloop.contracts import RunStatus
from pressloop.store import events as event_store
from pressloop.store import run_writes
from pressloop.store import threads as thread_store
from pressloop.store.notify import CHANNEL
from pressloop.store.run_writes import FinishWrite, RunWrite
from pressloop.store.schema import ID, UTCDateTime

_TEXTS = postgresql.ARRAY(sa.Text)
_IDS = postgresql.ARRAY(ID)
_INTEGERS = postgresql.ARRAY(sa.Integer)
_BOOLEANS = postgresql.ARRAY(sa.Boolean)
_TIMES = postgresql.ARRAY(UTCDateTime)

# JSON goes as text (serialised here, as SQLAlchemy's JSON type would) and is cast in the
# statement: a NULL element is "not written" (COALESCE keeps the stored value).
_FENCE = """
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
"""
# A batch with runs that finish: those (`w.finishing`) leave `running` in the same UPDATE (a row
# is updated once a statement), give their lease up, and get their transcripts and their
# threads' time. Only such batches pay for the longer text (one in a turn's few).
_FENCE_AND_FINISH = """
    WITH w AS (
        SELECT * FROM unnest(
            :run_ids, :tokens, :seqs, :checkpoints, :trace_contexts, :finishing, :f_status,
            :f_updated_at, :f_cancel_requested, :f_result, :f_error, :f_usage, :f_checkpoint,
            :f_not_before, :f_attempt, :f_finished_at
        ) AS w(
            id, token, seq, checkpoint, trace_context, finishing, status, updated_at,
            cancel_requested, result, error, usage, f_checkpoint, not_before, attempt,
            finished_at
        )
    ),
    fenced AS (
        UPDATE runs
        SET lease_expires_at = CASE WHEN w.finishing THEN NULL ELSE :expires END,
            lease_owner = CASE WHEN w.finishing THEN NULL ELSE runs.lease_owner END,
            updated_at = COALESCE(w.updated_at, :now),
            event_seq = w.seq,
            checkpoint = COALESCE(
                CAST(w.f_checkpoint AS JSONB), CAST(w.checkpoint AS JSONB), runs.checkpoint
            ),
            trace_context = COALESCE(CAST(w.trace_context AS JSONB), runs.trace_context),
            status = COALESCE(w.status, runs.status),
            cancel_requested = COALESCE(w.cancel_requested, runs.cancel_requested),
            result = COALESCE(CAST(w.result AS JSONB), runs.result),
            error = COALESCE(CAST(w.error AS JSONB), runs.error),
            usage = COALESCE(CAST(w.usage AS JSONB), runs.usage),
            not_before = COALESCE(w.not_before, runs.not_before),
            attempt = COALESCE(w.attempt, runs.attempt),
            finished_at = COALESCE(w.finished_at, runs.finished_at)
        FROM w
        WHERE runs.id = w.id AND runs.lease_token = w.token AND runs.status = :running
        RETURNING runs.id, runs.cancel_requested, w.finishing
    ),
    transcripts AS (
        INSERT INTO messages (
            thread_id, run_id, role, content, tool_calls, tool_call_id, name, untrusted,
            created_at
        )
        SELECT m.thread_id, m.run_id, m.role, m.content, CAST(m.tool_calls AS JSONB),
            m.tool_call_id, m.name, m.untrusted, m.created_at
        FROM unnest(
            :m_thread_ids, :m_run_ids, :m_roles, :m_contents, :m_tool_calls, :m_tool_call_ids,
            :m_names, :m_untrusted, :m_times
        ) WITH ORDINALITY AS m(
            thread_id, run_id, role, content, tool_calls, tool_call_id, name, untrusted,
            created_at, n
        )
        WHERE m.run_id IN (SELECT id FROM fenced WHERE finishing)
        ORDER BY m.n
    ),
    touched AS (
        UPDATE threads SET updated_at = t.at
        FROM unnest(:t_ids, :t_times, :t_run_ids) AS t(id, at, run_id)
        WHERE threads.id = t.id AND t.run_id IN (SELECT id FROM fenced WHERE finishing)
    ),
"""
# Both: the events of the runs fenced, and a notification for each run with new events.
_APPEND_NOTIFY = """
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
_TYPES: dict[str, sa.types.TypeEngine[Any]] = {
    "expires": UTCDateTime(),
    "now": UTCDateTime(),
    "running": sa.String(),
    "run_ids": _IDS,
    "tokens": _INTEGERS,
    "seqs": _INTEGERS,
    "checkpoints": _TEXTS,
    "trace_contexts": _TEXTS,
    "finishing": _BOOLEANS,
    "f_status": _TEXTS,
    "f_updated_at": _TIMES,
    "f_cancel_requested": _BOOLEANS,
    "f_result": _TEXTS,
    "f_error": _TEXTS,
    "f_usage": _TEXTS,
    "f_checkpoint": _TEXTS,
    "f_not_before": _TIMES,
    "f_attempt": _INTEGERS,
    "f_finished_at": _TIMES,
    "e_run_ids": _IDS,
    "e_thread_ids": _IDS,
    "e_seqs": _INTEGERS,
    "e_types": _TEXTS,
    "e_times": _TIMES,
    "e_data": _TEXTS,
    "m_thread_ids": _IDS,
    "m_run_ids": _IDS,
    "m_roles": _TEXTS,
    "m_contents": _TEXTS,
    "m_tool_calls": _TEXTS,
    "m_tool_call_ids": _TEXTS,
    "m_names": _TEXTS,
    "m_untrusted": _BOOLEANS,
    "m_times": _TIMES,
    "t_ids": _IDS,
    "t_times": _TIMES,
    "t_run_ids": _IDS,
    "channel": sa.String(),
}


def _statement(text: str) -> sa.TextClause:
    names = [name for name in _TYPES if re.search(rf":{name}\b", text)]
    return sa.text(text).bindparams(*(sa.bindparam(name, type_=_TYPES[name]) for name in names))


_FENCE_APPEND_NOTIFY = _statement(_FENCE + _APPEND_NOTIFY)
_FENCE_FINISH_APPEND_NOTIFY = _statement(_FENCE_AND_FINISH + _APPEND_NOTIFY)

# The columns a finish sets (`run_finish.finish_values`) that the statement knows; a finish with
# another column is written by `run_writes.finish_many` after the statement instead.
_FINISH_COLUMNS = frozenset(
    {
        "status",
        "lease_owner",
        "lease_expires_at",
        "updated_at",
        "cancel_requested",
        "result",
        "error",
        "usage",
        "checkpoint",
        "not_before",
        "attempt",
        "event_seq",
        "finished_at",
        "trace_context",
    }
)


async def fence_and_append(
    conn: AsyncConnection,
    writes: Sequence[RunWrite],
    *,
    now: datetime,
    ttl_s: float,
    finish: bool = False,
) -> dict[str, bool]:
    """Fence `writes`' runs and append the events of those still held; on PostgreSQL, notify
    the other processes of the runs with new events (at the commit). With `finish`, the held
    runs that finish also leave `running` and get their transcripts: in the same statement on
    PostgreSQL when `one_statement(writes)`, else by `run_writes.finish_many` after it, in the
    caller's transaction. Without it, the caller writes the finishes, after what else it has
    to write.

    Returns run id -> whether a person asked to cancel the run, for the runs held, as
    `run_writes.fence_many` does.
    """
    if conn.dialect.name != "postgresql":
        held = await run_writes.fence_many(conn, writes, now=now, ttl_s=ttl_s)
        events = [e for w in writes if w.run_id in held for e in w.events]
        await event_store.append_events(conn, events)
        if finish:
            await run_writes.finish_many(conn, [w for w in writes if w.run_id in held])
        return held
    folded = finish and one_statement(writes)
    events = [e for w in writes for e in w.events]
    params: dict[str, Any] = {
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
    }
    statement = _FENCE_APPEND_NOTIFY
    if folded and any(w.finish is not None for w in writes):
        statement = _FENCE_FINISH_APPEND_NOTIFY
        params.update(_finish_params(writes))
    rows = await conn.execute(statement, params)
    held = {row.id: bool(row.cancel_requested) for row in rows if row.id is not None}
    if finish and not folded:
        await run_writes.finish_many(conn, [w for w in writes if w.run_id in held])
    return held


def _finish_params(writes: Sequence[RunWrite]) -> dict[str, Any]:
    """The finishing statement's own parameters: each run's finish columns (NULL: not
    finishing, or the column kept), the transcripts and the threads to touch."""
    finishes = [w.finish for w in writes]
    ended = [(w, w.finish) for w in writes if w.finish is not None]
    rows = [
        row
        for w, f in ended
        for row in thread_store.message_rows(w.thread_id, f.transcript, now=f.at, run_id=w.run_id)
    ]
    return {
        "finishing": [f is not None for f in finishes],
        "f_status": _column(finishes, "status"),
        "f_updated_at": _column(finishes, "updated_at"),
        "f_cancel_requested": _column(finishes, "cancel_requested"),
        "f_result": _json_column(finishes, "result"),
        "f_error": _json_column(finishes, "error"),
        "f_usage": _json_column(finishes, "usage"),
        "f_checkpoint": _json_column(finishes, "checkpoint"),
        "f_not_before": _column(finishes, "not_before"),
        "f_attempt": _column(finishes, "attempt"),
        "f_finished_at": _column(finishes, "finished_at"),
        **{f"m_{column}": [row[key] for row in rows] for key, column in _MESSAGE_COLUMNS.items()},
        "m_tool_calls": [_json_or_none(row["tool_calls"]) for row in rows],
        "t_ids": [w.thread_id for w, _f in ended],
        "t_times": [f.at for _w, f in ended],
        "t_run_ids": [w.run_id for w, _f in ended],
    }


# `threads.message_rows`' keys -> the statement's message parameters (`m_<name>`), as they are.
_MESSAGE_COLUMNS = {
    "thread_id": "thread_ids",
    "run_id": "run_ids",
    "role": "roles",
    "content": "contents",
    "tool_call_id": "tool_call_ids",
    "name": "names",
    "untrusted": "untrusted",
    "created_at": "times",
}


def one_statement(writes: Sequence[RunWrite]) -> bool:
    """Whether `fence_and_append(..., finish=True)` writes these in one statement on PostgreSQL
    (else a finish is written after it: the caller needs a transaction around both)."""
    return all(_foldable(w.finish) for w in writes)


def _foldable(finish: FinishWrite | None) -> bool:
    """Whether the statement can write this finish: only columns it knows, the lease given up."""
    if finish is None:
        return True
    values = finish.values
    return (
        values.keys() <= _FINISH_COLUMNS
        and values.get("lease_owner") is None
        and values.get("lease_expires_at") is None
    )


def _column(finishes: Sequence[FinishWrite | None], name: str) -> list[Any]:
    return [None if f is None else f.values.get(name) for f in finishes]


def _json_column(finishes: Sequence[FinishWrite | None], name: str) -> list[str | None]:
    return [_json_or_none(value) for value in _column(finishes, name)]


def _json_or_none(value: Any) -> str | None:
    return None if value is None else json.dumps(value)

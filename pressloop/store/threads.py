"""Threads and their messages (the conversation every turn continues)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from pressloop.contracts import ActionCall, Message, Role
from pressloop.store.ids import new_id
from pressloop.store.records import ThreadRecord
from pressloop.store.schema import messages, threads


def _thread(row: sa.Row[Any]) -> ThreadRecord:
    m = row._mapping
    return ThreadRecord(
        id=m["id"],
        agent_id=m["agent_id"],
        parent_id=m["parent_id"],
        depth=m["depth"],
        title=m["title"],
        status=m["status"],
        created_by=m["created_by"],
        metadata=m["metadata"] or {},
        created_at=m["created_at"],
        updated_at=m["updated_at"],
    )


async def create_thread(
    conn: AsyncConnection,
    *,
    agent_id: str,
    now: datetime,
    title: str = "",
    created_by: str | None = None,
    metadata: dict[str, Any] | None = None,
    parent_id: str | None = None,
    depth: int = 0,
) -> ThreadRecord:
    # RETURNING: the record in the insert's round trip, not a read after it.
    row = (
        await conn.execute(
            sa.insert(threads)
            .values(
                id=new_id("thr"),
                agent_id=agent_id,
                parent_id=parent_id,
                depth=depth,
                title=title[:200],
                status="idle",
                created_by=created_by,
                metadata=metadata or {},
                created_at=now,
                updated_at=now,
            )
            .returning(*threads.c)
        )
    ).one()
    return _thread(row)


# Statements of every turn, built once (store/db.py).
_BY_ID = sa.select(threads).where(threads.c.id == sa.bindparam("b_id"))
_TOUCH = sa.update(threads).where(threads.c.id == sa.bindparam("b_id"))
_NEWEST = (
    sa.select(messages)
    .where(messages.c.thread_id == sa.bindparam("b_thread"))
    .order_by(messages.c.id.desc())
    .limit(sa.bindparam("b_limit"))
)
_INSERT_MESSAGES = sa.insert(messages)


async def get_thread(conn: AsyncConnection, thread_id: str) -> ThreadRecord | None:
    row = (await conn.execute(_BY_ID, {"b_id": thread_id})).one_or_none()
    return _thread(row) if row else None


async def list_threads(
    conn: AsyncConnection, *, limit: int = 50, parent_id: str | None = None
) -> list[ThreadRecord]:
    query = sa.select(threads).order_by(threads.c.updated_at.desc()).limit(limit)
    if parent_id is not None:
        query = query.where(threads.c.parent_id == parent_id)
    return [_thread(row) for row in (await conn.execute(query)).all()]


async def touch_thread(
    conn: AsyncConnection, thread_id: str, *, now: datetime, status: str | None = None
) -> None:
    values: dict[str, Any] = {"b_id": thread_id, "updated_at": now}
    if status is not None:
        values["status"] = status
    await conn.execute(_TOUCH, values)


async def touch_threads(conn: AsyncConnection, times: dict[str, datetime]) -> None:
    """Set each thread's `updated_at` (thread id -> time), in one executemany."""
    if times:
        await conn.execute(_TOUCH, [{"b_id": t, "updated_at": at} for t, at in times.items()])


def message_rows(
    thread_id: str, items: Sequence[Message], *, now: datetime, run_id: str | None = None
) -> list[dict[str, Any]]:
    return [
        {
            "thread_id": thread_id,
            "run_id": run_id,
            "role": m.role.value,
            "content": m.content,
            "tool_calls": [c.model_dump() for c in m.tool_calls] or None,
            "tool_call_id": m.tool_call_id,
            "name": m.name,
            "untrusted": m.untrusted,
            "created_at": now,
        }
        for m in items
    ]


async def append_message_rows(conn: AsyncConnection, rows: Sequence[dict[str, Any]]) -> None:
    if rows:
        await conn.execute(_INSERT_MESSAGES, list(rows))


async def append_messages(
    conn: AsyncConnection,
    thread_id: str,
    items: Sequence[Message],
    *,
    now: datetime,
    run_id: str | None = None,
) -> None:
    await append_message_rows(conn, message_rows(thread_id, items, now=now, run_id=run_id))


async def has_message_of_run(conn: AsyncConnection, thread_id: str, run_id: str) -> bool:
    """Whether the thread holds a message stored for this run (e.g. a child's report)."""
    query = sa.select(messages.c.id).where(
        messages.c.thread_id == thread_id, messages.c.run_id == run_id
    )
    return (await conn.execute(query.limit(1))).first() is not None


def _message(r: sa.Row[Any]) -> Message:
    return Message(
        role=Role(r.role),
        content=r.content,
        tool_calls=[ActionCall.model_validate(c) for c in (r.tool_calls or [])],
        tool_call_id=r.tool_call_id,
        name=r.name,
        untrusted=r.untrusted,
    )


async def list_messages(
    conn: AsyncConnection, thread_id: str, *, limit: int | None = None
) -> list[Message]:
    """The thread's transcript, oldest first (the newest `limit` messages when given)."""
    if limit is not None:
        newest = await conn.execute(_NEWEST, {"b_thread": thread_id, "b_limit": limit})
        return [_message(r) for r in reversed(newest.all())]
    query = sa.select(messages).where(messages.c.thread_id == thread_id)
    rows = (await conn.execute(query.order_by(messages.c.id))).all()
    return [_message(r) for r in rows]


async def recent_messages(
    conn: AsyncConnection, thread_ids: Sequence[str], *, limit: int
) -> dict[str, list[Message]]:
    """The newest `limit` messages of each thread, oldest first, in one query."""
    if len(thread_ids) == 1:
        return {thread_ids[0]: await list_messages(conn, thread_ids[0], limit=limit)}
    rank = (
        sa.func.row_number()
        .over(partition_by=messages.c.thread_id, order_by=messages.c.id.desc())
        .label("rank")
    )
    ranked = sa.select(messages, rank).where(messages.c.thread_id.in_(list(thread_ids))).subquery()
    rows = await conn.execute(
        sa.select(ranked).where(ranked.c.rank <= limit).order_by(ranked.c.thread_id, ranked.c.id)
    )
    found: dict[str, list[Message]] = {thread_id: [] for thread_id in thread_ids}
    for row in rows:
        found[row.thread_id].append(_message(row))
    return found

"""Agent memories: stored notes, found again by word overlap with what is being asked."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from pressloop.store.records import MemoryRecord
from pressloop.store.schema import memories

_WORD = re.compile(r"[\w']+", re.UNICODE)
# Memories are scored in Python; this many of the newest are considered (plenty for an agent).
SCAN_LIMIT = 2000


def words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) > 2}


def _memory(row: sa.Row[Any]) -> MemoryRecord:
    return MemoryRecord(
        id=row.id,
        agent_id=row.agent_id,
        content=row.content,
        tags=row.tags or [],
        untrusted=bool(row.untrusted),
        created_at=row.created_at,
    )


async def add_memory(
    conn: AsyncConnection,
    *,
    agent_id: str,
    content: str,
    tags: list[str],
    now: datetime,
    untrusted: bool = False,
) -> MemoryRecord:
    """`untrusted`: written in a tainted turn; later turns see it marked, and are tainted by it."""
    row = (
        await conn.execute(
            sa.insert(memories)
            .values(
                agent_id=agent_id, content=content, tags=tags, untrusted=untrusted, created_at=now
            )
            .returning(*memories.c)
        )
    ).one()
    return _memory(row)


_NEWEST = (  # built once: store/db.py
    sa.select(memories)
    .where(memories.c.agent_id == sa.bindparam("b_agent"))
    .order_by(memories.c.id.desc())
    .limit(sa.bindparam("b_limit"))
)


async def recent_memories(
    conn: AsyncConnection, agent_id: str, *, limit: int = SCAN_LIMIT
) -> list[MemoryRecord]:
    rows = (await conn.execute(_NEWEST, {"b_agent": agent_id, "b_limit": limit})).all()
    return [_memory(r) for r in rows]


async def search_memories(
    conn: AsyncConnection, agent_id: str, query: str, *, limit: int = 8
) -> list[MemoryRecord]:
    """The memories sharing most words with `query` (ties: newest first); newest if no query."""
    return rank_memories(await recent_memories(conn, agent_id), query, limit=limit)


def rank_memories(
    candidates: list[MemoryRecord], query: str, *, limit: int = 8
) -> list[MemoryRecord]:
    """`search_memories` over memories already read (newest first)."""
    wanted = words(query)
    if not wanted:
        return candidates[:limit]
    scored = [
        (len(wanted & (words(m.content) | {t.lower() for t in m.tags})), m) for m in candidates
    ]
    ranked = [m for score, m in sorted(scored, key=lambda s: (-s[0], -s[1].id)) if score > 0]
    return ranked[:limit]


async def delete_memories(conn: AsyncConnection, agent_id: str, ids: list[int]) -> int:
    result = await conn.execute(
        sa.delete(memories).where(memories.c.agent_id == agent_id, memories.c.id.in_(ids))
    )
    return int(result.rowcount)

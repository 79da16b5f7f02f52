"""Agents: the persona, files (AGENTS.md, SOUL.md, HEARTBEAT.md) and policy a thread runs with."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from pressloop.store.records import AgentRecord
from pressloop.store.schema import agents

DEFAULT_AGENT_ID = "default"


def _agent(row: sa.Row[Any]) -> AgentRecord:
    m = row._mapping
    return AgentRecord(
        id=m["id"],
        name=m["name"],
        instructions=m["instructions"],
        files=m["files"] or {},
        policy=m["policy"] or {},
        created_at=m["created_at"],
    )


_BY_ID = sa.select(agents).where(agents.c.id == sa.bindparam("b_id"))  # built once: store/db.py


async def get_agent(conn: AsyncConnection, agent_id: str) -> AgentRecord | None:
    row = (await conn.execute(_BY_ID, {"b_id": agent_id})).one_or_none()
    return _agent(row) if row else None


async def get_agents(conn: AsyncConnection, agent_ids: set[str]) -> dict[str, AgentRecord]:
    """The agents among `agent_ids` that exist, by id, in one query."""
    if len(agent_ids) == 1:
        (agent_id,) = agent_ids
        agent = await get_agent(conn, agent_id)
        return {} if agent is None else {agent_id: agent}
    rows = await conn.execute(sa.select(agents).where(agents.c.id.in_(sorted(agent_ids))))
    return {row.id: _agent(row) for row in rows}


async def ensure_agent(
    conn: AsyncConnection,
    *,
    now: datetime,
    agent_id: str = DEFAULT_AGENT_ID,
    name: str = "Site assistant",
    instructions: str = "",
    files: dict[str, str] | None = None,
) -> AgentRecord:
    existing = await get_agent(conn, agent_id)
    if existing is not None:
        return existing
    await conn.execute(
        sa.insert(agents).values(
            id=agent_id,
            name=name,
            instructions=instructions,
            files=files or {},
            policy={},
            created_at=now,
        )
    )
    created = await get_agent(conn, agent_id)
    assert created is not None
    return created


async def list_agents(conn: AsyncConnection) -> list[AgentRecord]:
    return [_agent(r) for r in (await conn.execute(sa.select(agents).order_by(agents.c.id))).all()]


async def update_agent(conn: AsyncConnection, agent_id: str, **fields: Any) -> AgentRecord | None:
    if fields:
        await conn.execute(sa.update(agents).where(agents.c.id == agent_id).values(**fields))
    return await get_agent(conn, agent_id)

"""Agents: their instructions, files (AGENTS.md, SOUL.md, HEARTBEAT.md) and policy overrides."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, Field

from pressloop.api.auth import Admin, ServiceDep, Viewer
from pressloop.api.schemas import Request
from pressloop.contracts import Trigger
from pressloop.errors import InvalidRequest, NotFound
from pressloop.policy import resolve_policy
from pressloop.store import agents as agent_store
from pressloop.store.records import AgentRecord

router = APIRouter(prefix="/v1/agents", tags=["agents"])
FILES = ("AGENTS.md", "SOUL.md", "HEARTBEAT.md")


class AgentOut(BaseModel):
    id: str
    name: str
    instructions: str
    files: dict[str, str]
    policy: dict[str, Any]
    created_at: datetime

    @classmethod
    def of(cls, agent: AgentRecord) -> AgentOut:
        return cls.model_validate(agent.__dict__)


class AgentUpdate(Request):
    name: str | None = Field(default=None, min_length=1, max_length=200)
    instructions: str | None = Field(default=None, max_length=20_000)
    files: dict[str, str] | None = Field(
        default=None, description="AGENTS.md, SOUL.md and HEARTBEAT.md, each up to 20,000 chars."
    )
    policy: dict[str, Any] | None = Field(
        default=None,
        description='Overrides, flat or per trigger: {"heartbeat": {"max_rounds": 2}}.',
    )


@router.get("")
async def list_agents(service: ServiceDep, _who: Viewer) -> list[AgentOut]:
    async with service.database.read() as conn:
        return [AgentOut.of(a) for a in await agent_store.list_agents(conn)]


@router.get("/{agent_id}")
async def show_agent(agent_id: str, service: ServiceDep, _who: Viewer) -> AgentOut:
    async with service.database.read() as conn:
        agent = await agent_store.get_agent(conn, agent_id)
    if agent is None:
        raise NotFound(f"agent {agent_id!r} does not exist")
    return AgentOut.of(agent)


@router.patch("/{agent_id}")
async def update_agent(
    agent_id: str, body: AgentUpdate, service: ServiceDep, _who: Admin
) -> AgentOut:
    """Change the agent (admin: a policy may loosen the defaults)."""
    changes = body.model_dump(exclude_none=True)
    if body.files is not None:
        unknown = set(body.files) - set(FILES)
        if unknown or any(len(text) > 20_000 for text in body.files.values()):
            raise InvalidRequest(f"files are {', '.join(FILES)}, each up to 20,000 characters")
    if body.policy is not None:
        for trigger in Trigger:
            resolve_policy(trigger, agent=body.policy)  # a bad policy is a 422 now, not later
    async with service.database.write() as conn:
        agent = await agent_store.update_agent(conn, agent_id, **changes)
    if agent is None:
        raise NotFound(f"agent {agent_id!r} does not exist")
    return AgentOut.of(agent)

"""Agents: their instructions, files (AGENTS.md, SOUL.md, HEARTBEAT.md) and policy overrides."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter
from pydantic import Field

from pressloop.api.auth import Admin, ServiceDep, Viewer
from pressloop.api.bounds import Id
from pressloop.api.schemas import LayerPolicy, RecordOut, Request

router = APIRouter(prefix="/v1/agents", tags=["agents"])
MAX_FILE_CHARS = 20_000


class AgentOut(RecordOut):
    id: str
    name: str
    instructions: str
    files: dict[str, str]
    policy: dict[str, Any]
    created_at: datetime


class AgentFiles(Request):
    """The agent's files, each up to 20,000 characters; the ones sent replace the stored set."""

    agents_md: str | None = Field(default=None, alias="AGENTS.md", max_length=MAX_FILE_CHARS)
    soul_md: str | None = Field(default=None, alias="SOUL.md", max_length=MAX_FILE_CHARS)
    heartbeat_md: str | None = Field(default=None, alias="HEARTBEAT.md", max_length=MAX_FILE_CHARS)


class AgentUpdate(Request):
    name: str | None = Field(default=None, min_length=1, max_length=200)
    instructions: str | None = Field(default=None, max_length=MAX_FILE_CHARS)
    files: AgentFiles | None = None
    policy: LayerPolicy | None = Field(
        default=None,
        description='Overrides, flat or per trigger: {"heartbeat": {"max_rounds": 2}}.',
    )

    def changes(self) -> dict[str, Any]:
        changes: dict[str, Any] = self.model_dump(exclude_none=True, exclude={"files", "policy"})
        if self.files is not None:
            changes["files"] = self.files.model_dump(by_alias=True, exclude_none=True)
        if self.policy is not None:
            changes["policy"] = self.policy.model_dump(mode="json", exclude_none=True)
        return changes


@router.get("")
async def list_agents(service: ServiceDep, _who: Viewer) -> list[AgentOut]:
    return [AgentOut.of(a) for a in await service.list_agents()]


@router.get("/{agent_id}")
async def show_agent(agent_id: Id, service: ServiceDep, _who: Viewer) -> AgentOut:
    return AgentOut.of(await service.get_agent(agent_id))


@router.patch("/{agent_id}")
async def update_agent(
    agent_id: Id, body: AgentUpdate, service: ServiceDep, _who: Admin
) -> AgentOut:
    """Change the agent (admin: a policy may loosen the defaults)."""
    return AgentOut.of(await service.update_agent(agent_id, body.changes()))

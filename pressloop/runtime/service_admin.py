"""What an admin configures without a restart: API tokens, the agents (instructions, files, policy
overrides) and the site-wide settings (the kill switch, the per-trigger policy defaults).

A mixin of `Service`, which provides `settings`, `database` and `now`; the API's `/v1/agents`
and `/v1/settings` and the UI's settings page read and change them only through it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pressloop.clock import Now
from pressloop.config import Settings
from pressloop.contracts import Trigger
from pressloop.errors import InvalidRequest, NotFound
from pressloop.policy import resolve_policy
from pressloop.runtime.context import KILL_SWITCH_SETTING
from pressloop.runtime.kill_switch import KillSwitch, read_kill_switch
from pressloop.runtime.mcp_servers_admin import McpServersAdmin
from pressloop.runtime.site_policies import set_trigger_defaults, trigger_defaults
from pressloop.runtime.worker import Worker
from pressloop.store import agents as agent_store
from pressloop.store import settings_repo
from pressloop.store import tokens as token_store
from pressloop.store.db import Database
from pressloop.store.notify import announce_claimable
from pressloop.store.records import AgentRecord, TokenRecord


@dataclass(frozen=True, kw_only=True)
class SiteSettings:
    kill_switch: KillSwitch
    # Per trigger: the site's `changes` and the resulting `policy` (before agent and thread).
    policies: dict[str, dict[str, Any]]


class ServiceAdmin(McpServersAdmin):  # the MCP servers: runtime/mcp_servers_admin.py
    settings: Settings
    database: Database
    now: Now
    worker: Worker | None

    # API tokens ------------------------------------------------------------------------------

    async def create_token(self, *, name: str, role: str) -> tuple[TokenRecord, str]:
        """A new API token; the plaintext comes back once, only its hash is stored."""
        if role not in token_store.ROLES:
            raise InvalidRequest(f"role must be one of {', '.join(token_store.ROLES)}")
        async with self.database.write() as conn:
            return await token_store.create_token(conn, name=name, role=role, now=self.now())

    # Agents ----------------------------------------------------------------------------------

    async def list_agents(self) -> list[AgentRecord]:
        async with self.database.read() as conn:
            return await agent_store.list_agents(conn)

    async def get_agent(self, agent_id: str) -> AgentRecord:
        async with self.database.read() as conn:
            agent = await agent_store.get_agent(conn, agent_id)
        if agent is None:
            raise NotFound(f"agent {agent_id!r} does not exist")
        return agent

    async def default_agent(self) -> AgentRecord | None:
        """The agent new threads get (None only before `Service.open` has made it)."""
        async with self.database.read() as conn:
            return await agent_store.get_agent(conn, agent_store.DEFAULT_AGENT_ID)

    async def update_agent(self, agent_id: str, changes: Mapping[str, Any]) -> AgentRecord:
        """Change the agent's name, instructions, files or policy (`changes` holds only those
        sent). A policy may loosen the defaults, so only admins get here."""
        if "policy" in changes:
            # Checked against every trigger now, rather than failing every later run.
            for trigger in Trigger:
                resolve_policy(trigger, agent=changes["policy"])
        async with self.database.write() as conn:
            agent = await agent_store.update_agent(conn, agent_id, **changes)
        if agent is None:
            raise NotFound(f"agent {agent_id!r} does not exist")
        return agent

    # Site-wide settings ----------------------------------------------------------------------

    async def site_settings(self) -> SiteSettings:
        async with self.database.read() as conn:
            switch = await read_kill_switch(conn, self.settings)
            policies = await trigger_defaults(conn)
        return SiteSettings(kill_switch=switch, policies=policies)

    async def update_site_settings(
        self,
        *,
        agent_disabled: bool | None = None,
        policies: Mapping[str, Mapping[str, Any] | None] | None = None,
    ) -> SiteSettings:
        """Set the kill switch and each trigger's policy changes (None or {}: back to the
        built-in defaults) in one transaction: all or nothing. Triggers left out keep theirs."""
        async with self.database.write() as conn:
            if agent_disabled is not None:
                await settings_repo.set_setting(
                    conn, KILL_SWITCH_SETTING, agent_disabled, now=self.now()
                )
                if not agent_disabled:  # the runs it held back may start: every worker looks
                    await announce_claimable(conn)
            for trigger, changes in (policies or {}).items():
                await set_trigger_defaults(conn, trigger, changes, now=self.now())
        if agent_disabled is False and self.worker is not None:
            self.worker.wake()  # this process's worker too (SQLite has no notifications)
        return await self.site_settings()

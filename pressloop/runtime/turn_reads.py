"""What a new turn's checks, its policy and its claim read, read once in the transaction that
stores the turn (`Service.submit`).

That transaction looked at the kill switch, the day's budget counters, the agent (for its
policy), the site's policy settings, and then, claiming the run to start it here, read the
agent, the kill switch and the counters again for the run's context: seven statements where
three carry the same rows. On PostgreSQL every statement is a round trip on the serving event
loop, and under 200 streams starting together those round trips are what delays other streams'
first tokens, so they are read once and handed to each step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from pressloop.config import Settings
from pressloop.runtime.budgets import usage_rows
from pressloop.runtime.context import KILL_SWITCH_SETTING
from pressloop.runtime.site_policies import SITE_POLICY_KEYS
from pressloop.store import agents as agent_store
from pressloop.store import settings_repo
from pressloop.store.records import AgentRecord, RunRecord


@dataclass(kw_only=True, frozen=True)
class TurnReads:
    """One new turn's shared reads: of agent `agent_id`, for `user`, on UTC day `day`."""

    agent_id: str
    agent: AgentRecord | None
    user: str | None
    day: str
    # The day's counters of the site and of `user` (`budgets.usage_rows`).
    usage: list[dict[str, Any]]
    # The kill switch's and the site policies' settings as stored (never set: missing).
    stored: dict[str, Any]

    @property
    def switched_off(self) -> bool:
        """The kill switch's setting (the environment's is the caller's to add)."""
        return bool(self.stored.get(KILL_SWITCH_SETTING, False))

    def covers(self, run: RunRecord, *, day: str) -> bool:
        """These reads are `run`'s context's: its agent, its user's counters, that day."""
        same_agent = run.agent_id == self.agent_id
        return same_agent and run.requesting_user == self.user and day == self.day


async def read_turn(
    conn: AsyncConnection, settings: Settings, *, agent_id: str, user: str | None, day: str
) -> TurnReads:
    """The shared reads of a turn of `agent_id` for `user`: three statements."""
    agent = await agent_store.get_agent(conn, agent_id)
    stored = await settings_repo.get_settings(conn, [KILL_SWITCH_SETTING, *SITE_POLICY_KEYS])
    usage = await usage_rows(conn, settings, users={user}, day=day)
    return TurnReads(agent_id=agent_id, agent=agent, user=user, day=day, usage=usage, stored=stored)

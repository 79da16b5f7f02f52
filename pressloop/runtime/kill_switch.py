"""The kill switch (DESIGN.md section 3): while it is on, no turn starts.

It is on from the environment (`PRESSLOOP_DISABLE_AGENT=1`, per process) or from the
`agent_disabled` setting in the database (the admin UI, `PATCH /v1/settings`). While it is on:
- a new message is refused before anything is stored: 503 `agent_disabled` at the API, a
  non-zero exit from `pressloop chat` (`Service.submit`, `Service.check_enabled`);
- runs already queued (a retry, an approved step, a heartbeat) stay queued: a claim that finds
  it on (in the contexts it reads, `runtime/context.py`) is rolled back (`Runner.claim_many`),
  and they start once it is off.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sqlalchemy.ext.asyncio import AsyncConnection

from pressloop.config import Settings
from pressloop.errors import AgentDisabled
from pressloop.runtime.context import KILL_SWITCH_SETTING
from pressloop.runtime.turn_reads import TurnReads
from pressloop.store import settings_repo

Source = Literal["environment", "setting"]


class SwitchedOff(Exception):
    """Raised inside a claim's transaction to roll it back: the kill switch is on."""


@dataclass(kw_only=True, frozen=True)
class KillSwitch:
    by_environment: bool
    by_setting: bool

    @property
    def on(self) -> bool:
        return self.by_environment or self.by_setting

    @property
    def source(self) -> Source | None:
        """Where it is on from (the environment wins: the setting cannot turn it off)."""
        if self.by_environment:
            return "environment"
        return "setting" if self.by_setting else None

    def refusal(self) -> AgentDisabled:
        if self.by_environment:
            how = "PRESSLOOP_DISABLE_AGENT=1 is set in the environment: unset it and restart"
        else:
            how = (
                "the agent_disabled setting is on: turn it off in the admin UI's settings or "
                'with PATCH /v1/settings {"agent_disabled": false}'
            )
        return AgentDisabled(f"the agent is disabled (kill switch); nothing was stored. {how}")


async def read_kill_switch(conn: AsyncConnection, settings: Settings) -> KillSwitch:
    stored = await settings_repo.get_setting(conn, KILL_SWITCH_SETTING, False)
    return KillSwitch(by_environment=settings.disable_agent, by_setting=bool(stored))


async def refuse_if_disabled(
    conn: AsyncConnection, settings: Settings, *, reads: TurnReads | None = None
) -> None:
    """Raise `AgentDisabled` (HTTP 503) while the kill switch is on. `reads`: the setting as
    this transaction read it already."""
    if reads is not None:
        switch = KillSwitch(by_environment=settings.disable_agent, by_setting=reads.switched_off)
    else:
        switch = await read_kill_switch(conn, settings)
    if switch.on:
        raise switch.refusal()

"""Site-wide settings kept in the database: changed at run time, no restart (admin only).

- `agent_disabled`: the kill switch (PRESSLOOP_DISABLE_AGENT turns it on from the environment).
- `policies`: per trigger, the fields that differ from the built-in defaults (DESIGN section 6);
  agents and threads may override them, a request only tightens.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, Field

from pressloop.api.auth import Admin, ServiceDep, Viewer
from pressloop.api.schemas import Request
from pressloop.runtime.runner import KILL_SWITCH_SETTING
from pressloop.runtime.site_policies import set_trigger_defaults, trigger_defaults
from pressloop.store import settings_repo

router = APIRouter(prefix="/v1/settings", tags=["settings"])


class TriggerPolicy(BaseModel):
    changes: dict[str, Any] = Field(description="What the site changed from the built-in default.")
    policy: dict[str, Any] = Field(description="The resulting policy (before agent and thread).")


class SettingsOut(BaseModel):
    agent_disabled: bool = Field(description="The kill switch: no run starts while it is on.")
    agent_disabled_by_env: bool
    policies: dict[str, TriggerPolicy]


class SettingsUpdate(Request):
    agent_disabled: bool | None = None
    policies: dict[str, dict[str, Any] | None] | None = Field(
        default=None,
        description='Per trigger, the fields to set ({"heartbeat": {"write": "confirm"}}); '
        "a trigger given {} or null goes back to the built-in defaults; triggers left out "
        "keep their settings.",
    )


async def _current(service: ServiceDep) -> SettingsOut:
    async with service.database.read() as conn:
        disabled = await settings_repo.get_setting(conn, KILL_SWITCH_SETTING, False)
        policies = await trigger_defaults(conn)
    return SettingsOut(
        agent_disabled=bool(disabled),
        agent_disabled_by_env=service.settings.disable_agent,
        policies={k: TriggerPolicy.model_validate(v) for k, v in policies.items()},
    )


@router.get("")
async def show_settings(service: ServiceDep, _who: Viewer) -> SettingsOut:
    return await _current(service)


@router.patch("")
async def update_settings(body: SettingsUpdate, service: ServiceDep, _who: Admin) -> SettingsOut:
    """Change the kill switch and the per-trigger policies in one transaction: all or nothing."""
    async with service.database.write() as conn:
        if body.agent_disabled is not None:
            await settings_repo.set_setting(
                conn, KILL_SWITCH_SETTING, body.agent_disabled, now=service.now()
            )
        for trigger, changes in (body.policies or {}).items():
            await set_trigger_defaults(conn, trigger, changes, now=service.now())
    return await _current(service)

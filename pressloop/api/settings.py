"""Site-wide settings kept in the database: changed at run time, no restart (admin only).

- `agent_disabled`: the kill switch (PRESSLOOP_DISABLE_AGENT turns it on from the environment).
- `policies`: per trigger, the fields that differ from the built-in defaults (DESIGN section 6);
  agents and threads may override them, a request only tightens.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, Field, JsonValue, StrictBool, field_validator

from pressloop.api.auth import Admin, ServiceDep, Viewer
from pressloop.api.schemas import TRIGGER_NAMES, PolicyFields, Request
from pressloop.runtime.kill_switch import Source, read_kill_switch
from pressloop.runtime.runner import KILL_SWITCH_SETTING
from pressloop.runtime.site_policies import set_trigger_defaults, trigger_defaults
from pressloop.store import settings_repo

router = APIRouter(prefix="/v1/settings", tags=["settings"])


class TriggerPolicy(BaseModel):
    changes: dict[str, Any] = Field(description="What the site changed from the built-in default.")
    policy: dict[str, Any] = Field(description="The resulting policy (before agent and thread).")


class SettingsOut(BaseModel):
    agent_disabled: bool = Field(
        description="The kill switch in effect (environment or setting): no run starts while "
        "it is on, and new messages are refused with 503 agent_disabled."
    )
    agent_disabled_by_env: bool
    agent_disabled_by_setting: bool = Field(description="The agent_disabled setting's value.")
    agent_disabled_source: Source | None = Field(
        description="Where the switch is on from: environment (PRESSLOOP_DISABLE_AGENT, which "
        "the setting cannot override) or setting; null when it is off."
    )
    policies: dict[str, TriggerPolicy]


class SettingsUpdate(Request):
    agent_disabled: StrictBool | None = None
    policies: dict[str, PolicyFields | None] | None = Field(
        default=None,
        description='Per trigger, the fields to set ({"heartbeat": {"write": "confirm"}}); '
        "a trigger given {} or null goes back to the built-in defaults; triggers left out "
        "keep their settings.",
        json_schema_extra={"propertyNames": {"enum": list[JsonValue](TRIGGER_NAMES)}},
    )

    @field_validator("policies")
    @classmethod
    def _known_triggers(
        cls, policies: dict[str, PolicyFields | None] | None
    ) -> dict[str, PolicyFields | None] | None:
        unknown = sorted(set(policies or {}) - set(TRIGGER_NAMES))
        if unknown:
            raise ValueError(f"unknown trigger {unknown[0]!r}: one of {', '.join(TRIGGER_NAMES)}")
        return policies


async def _current(service: ServiceDep) -> SettingsOut:
    async with service.database.read() as conn:
        switch = await read_kill_switch(conn, service.settings)
        policies = await trigger_defaults(conn)
    return SettingsOut(
        agent_disabled=switch.on,
        agent_disabled_by_env=switch.by_environment,
        agent_disabled_by_setting=switch.by_setting,
        agent_disabled_source=switch.source,
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
            fields = changes.changes() if changes is not None else None
            await set_trigger_defaults(conn, trigger, fields, now=service.now())
    return await _current(service)

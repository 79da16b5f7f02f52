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
from pressloop.runtime.kill_switch import Source
from pressloop.runtime.service_admin import SiteSettings

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

    @classmethod
    def of(cls, site: SiteSettings) -> SettingsOut:
        switch = site.kill_switch
        return cls(
            agent_disabled=switch.on,
            agent_disabled_by_env=switch.by_environment,
            agent_disabled_by_setting=switch.by_setting,
            agent_disabled_source=switch.source,
            policies={k: TriggerPolicy.model_validate(v) for k, v in site.policies.items()},
        )


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


@router.get("")
async def show_settings(service: ServiceDep, _who: Viewer) -> SettingsOut:
    return SettingsOut.of(await service.site_settings())


@router.patch("")
async def update_settings(body: SettingsUpdate, service: ServiceDep, _who: Admin) -> SettingsOut:
    """Change the kill switch and the per-trigger policies in one transaction: all or nothing."""
    policies = {
        trigger: changes.changes() if changes is not None else None
        for trigger, changes in (body.policies or {}).items()
    }
    site = await service.update_site_settings(agent_disabled=body.agent_disabled, policies=policies)
    return SettingsOut.of(site)

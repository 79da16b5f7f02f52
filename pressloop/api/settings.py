"""Site-wide settings kept in the database: changed at run time, no restart (admin only)."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel, Field

from pressloop.api.auth import Admin, ServiceDep, Viewer
from pressloop.api.schemas import Request
from pressloop.runtime.runner import KILL_SWITCH_SETTING
from pressloop.store import settings_repo

router = APIRouter(prefix="/v1/settings", tags=["settings"])


class SettingsOut(BaseModel):
    agent_disabled: bool = Field(
        description="The kill switch: no run starts while it is on (PRESSLOOP_DISABLE_AGENT "
        "turns it on from the environment as well)."
    )
    agent_disabled_by_env: bool


class SettingsUpdate(Request):
    agent_disabled: bool | None = None


async def _current(service: ServiceDep) -> SettingsOut:
    async with service.database.read() as conn:
        disabled = await settings_repo.get_setting(conn, KILL_SWITCH_SETTING, False)
    return SettingsOut(
        agent_disabled=bool(disabled), agent_disabled_by_env=service.settings.disable_agent
    )


@router.get("")
async def show_settings(service: ServiceDep, _who: Viewer) -> SettingsOut:
    return await _current(service)


@router.patch("")
async def update_settings(body: SettingsUpdate, service: ServiceDep, _who: Admin) -> SettingsOut:
    if body.agent_disabled is not None:
        async with service.database.write() as conn:
            await settings_repo.set_setting(
                conn, KILL_SWITCH_SETTING, body.agent_disabled, now=service.now()
            )
    return await _current(service)

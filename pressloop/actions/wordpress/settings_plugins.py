"""Plugins (list, activate, deactivate, delete), settings (get, update) and themes (list).

Installing plugins from wordpress.org is not offered: the sites we run next to may have no
internet, and installing code is a person's job. A plugin is named by its file id as WordPress
gives it ("akismet/akismet", without ".php") or by its name; both are resolved against the list.
"""

from __future__ import annotations

from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.json_schema import SkipJsonSchema

from pressloop.actions.registry import ActionResult, ActionServices, ActionSpec
from pressloop.actions.wordpress.client import WordPressClient
from pressloop.actions.wordpress.common import rendered, site
from pressloop.actions.wordpress.refs import matching, which_one
from pressloop.contracts import DICTATED, ActionContext, Risk
from pressloop.errors import ActionError


class ListPluginsParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    # Still accepted, no longer offered: asked "which plugins are installed?", a small model
    # chose a filter and answered with half of them. The list always says each one's status.
    status: SkipJsonSchema[Literal["active", "inactive"] | None] = Field(
        default=None, description="Only active or only inactive ones (default: both)."
    )
    search: str | None = Field(default=None, description="Words in the plugin's name.")


class PluginParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    plugin: str = Field(
        min_length=1,
        description='The plugin file id from list_plugins (e.g. "akismet/akismet") or its name.',
    )


def _plugin(item: dict[str, Any]) -> dict[str, Any]:
    return {
        "plugin": item["plugin"],
        "name": rendered(item.get("name")),
        "status": item.get("status"),
        "version": item.get("version"),
        "description": (rendered(item.get("description")) or "")[:200],
    }


async def find_plugin(wp: WordPressClient, wanted: str) -> dict[str, Any]:
    """By file id ("akismet/akismet"), folder ("akismet") or name, any case; then a unique
    partial match of the name. Several: the candidates, never a guess."""
    key = wanted.strip().removesuffix(".php")
    plugins = await wp.get("/wp/v2/plugins")

    def names(item: dict[str, Any]) -> list[Any]:
        return [item["plugin"], item["plugin"].split("/")[0], rendered(item.get("name"))]

    found = matching(key, plugins, names)
    if not found and "/" in key:  # "folder/file" of a one-file plugin whose id is "folder"
        found = matching(key.split("/")[0], plugins, names)
    if len(found) == 1:
        return _plugin(found[0])
    if found:
        lines = [f"{p['plugin']} ({rendered(p.get('name'))}, {p.get('status')})" for p in found]
        raise which_one("plugin", "plugin", wanted, lines)
    known = ", ".join(p["plugin"] for p in plugins)
    raise ActionError(
        f"no plugin {wanted!r} is installed, and no action can install one; installed: {known}"
    )


# Words that ask about a status, not a name: "search": "inactive" is the question "which are
# inactive?", which the full list (each plugin's status) answers.
_STATUS_WORDS = frozenset(
    {"active", "inactive", "installed", "enabled", "disabled", "activated", "deactivated",
     "switched", "off", "on", "plugin", "plugins", "all", "any"}
)  # fmt: skip


async def list_plugins(
    params: ListPluginsParams, _c: ActionContext, services: ActionServices
) -> ActionResult:
    query = params.model_dump(exclude_none=True)
    if set(str(query.get("search", "")).casefold().split()) <= _STATUS_WORDS:
        query.pop("search", None)
    wp = site(services)
    plugins = [_plugin(p) for p in await wp.get("/wp/v2/plugins", query)]
    missed = ""
    if not plugins and query.get("search"):
        # Nothing by that name: the whole list, so the answer can say what is there instead.
        missed = query.pop("search")
        plugins = [_plugin(p) for p in await wp.get("/wp/v2/plugins", query)]
    active = sum(p["status"] in ("active", "network-active") for p in plugins)
    covered = params.status or "active and inactive"
    on = [p["name"] for p in plugins if p["status"] in ("active", "network-active")]
    off = [p["name"] for p in plugins if p["status"] not in ("active", "network-active")]
    summary = (
        f"{len(plugins)} {params.status} plugins"
        if params.status
        else f"{len(plugins)} plugins installed ({active} active, {len(plugins) - active} inactive)"
    )
    content: dict[str, Any] = {}
    if missed:
        content["no_plugin_matches"] = missed
        summary = f"no plugin matches {missed!r}; {summary}"
    # The names by status first: a small model reads two short lists more reliably than a
    # status inside each of several long objects.
    content |= {
        "active_plugins": on,
        "inactive_plugins": off,
        "included": covered,
        "active": active,
        "inactive": len(plugins) - active,
        "plugins": plugins,
    }
    return ActionResult(content=content, summary=summary)


async def _set_status(wp: WordPressClient, plugin: str, status: str) -> dict[str, Any]:
    changed = await wp.post(f"/wp/v2/plugins/{plugin}", {"status": status}, idempotent=True)
    return _plugin(changed)


def _switch(status: str) -> Any:
    async def handler(
        params: PluginParams, _c: ActionContext, services: ActionServices
    ) -> ActionResult:
        wp = site(services)
        before = await find_plugin(wp, params.plugin)
        if before["status"] == status:
            return ActionResult(
                content=before | {"changed": False},
                summary=f"{before['plugin']} was already {status}",
            )
        after = await _set_status(wp, before["plugin"], status)
        return ActionResult(
            content=after | {"changed": True, "status_before": before["status"]},
            summary=f"{after['plugin']} is now {after['status']}",
        )

    return handler


async def status_before(
    params: PluginParams, _c: ActionContext, services: ActionServices
) -> dict[str, Any]:
    found = await find_plugin(site(services), params.plugin)
    return {"plugin": found["plugin"], "status": found["status"]}


def _status_preview(status: str) -> Any:
    async def preview(
        params: PluginParams, context: ActionContext, services: ActionServices
    ) -> dict[str, Any]:
        before = await status_before(params, context, services)
        return {"before": before, "after": before | {"status": status}}

    return preview


async def restore_status(
    snapshot: dict[str, Any], _data: Any, services: ActionServices
) -> ActionResult:
    status = "active" if snapshot["status"] == "network-active" else snapshot["status"]
    after = await _set_status(site(services), snapshot["plugin"], status)
    return ActionResult(content=after, summary=f"{after['plugin']} is {after['status']} again")


async def _deletable(params: PluginParams, services: ActionServices) -> dict[str, Any]:
    found = await find_plugin(site(services), params.plugin)
    if found["status"] != "inactive":
        raise ActionError(f"{found['plugin']} is {found['status']}: deactivate it first")
    return found


async def delete_plugin_preview(
    params: PluginParams, _c: ActionContext, services: ActionServices
) -> dict[str, Any]:
    return {"before": await _deletable(params, services), "after": None}


async def delete_plugin(
    params: PluginParams, _c: ActionContext, services: ActionServices
) -> ActionResult:
    found = await _deletable(params, services)
    await site(services).delete(f"/wp/v2/plugins/{found['plugin']}")
    return ActionResult(
        content={"deleted": found}, summary=f"deleted plugin {found['plugin']} (its files)"
    )


# -- settings -----------------------------------------------------------------------------------


class NoParams(BaseModel):
    model_config = ConfigDict(extra="forbid")


class UpdateSettingsParams(BaseModel):
    """The settings WordPress's /wp/v2/settings accepts (its site address is left alone)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=DICTATED)
    title: str | None = Field(default=None, description="Site title.")
    description: str | None = Field(default=None, description="Tagline.")
    email: str | None = Field(default=None, description="Site administration email address.")
    timezone: str | None = Field(
        default=None, description='A city timezone like "Europe/Paris", or "UTC".'
    )
    date_format: str | None = Field(default=None, description='PHP date format, e.g. "F j, Y".')
    time_format: str | None = Field(default=None, description='PHP time format, e.g. "g:i a".')
    start_of_week: int | None = Field(default=None, ge=0, le=6, description="0 is Sunday.")
    language: str | None = Field(default=None, description='Installed locale, e.g. "en_US".')
    use_smilies: bool | None = Field(default=None, description="Turn :-) into graphics.")
    default_category: int | None = Field(default=None, ge=1, description="Category id.")
    default_post_format: str | None = Field(default=None, description='E.g. "standard".')
    posts_per_page: int | None = Field(default=None, ge=1, le=1000, description="Blog pages.")
    show_on_front: Literal["posts", "page"] | None = Field(
        default=None, description="Front page shows latest posts or a static page."
    )
    page_on_front: int | None = Field(default=None, ge=0, description="Static front page id.")
    page_for_posts: int | None = Field(default=None, ge=0, description="Posts page id.")
    default_ping_status: Literal["open", "closed"] | None = None
    default_comment_status: Literal["open", "closed"] | None = Field(
        default=None, description="Comments on new posts."
    )

    def changes(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)

    @model_validator(mode="after")
    def _something(self) -> Self:
        if not self.changes():
            raise ValueError("give at least one setting to change")
        return self


# Settings that decide who gets in or where the site is: the admin email (password resets and
# notices), registration and its default role, the site's addresses.
ACCESS_SETTINGS = frozenset({"email", "users_can_register", "default_role", "url", "home"})


def changes_access(params: UpdateSettingsParams, _services: ActionServices) -> bool:
    return bool(ACCESS_SETTINGS & params.changes().keys())


async def get_settings(
    _params: NoParams, _c: ActionContext, services: ActionServices
) -> ActionResult:
    settings = await site(services).get("/wp/v2/settings", context="")
    return ActionResult(content=settings, summary=f"settings of {settings.get('title')!r}")


async def settings_before(
    params: UpdateSettingsParams, _c: ActionContext, services: ActionServices
) -> dict[str, Any]:
    current = await site(services).get("/wp/v2/settings", context="")
    return {key: current.get(key) for key in params.changes()}


async def settings_preview(
    params: UpdateSettingsParams, context: ActionContext, services: ActionServices
) -> dict[str, Any]:
    return {"before": await settings_before(params, context, services), "after": params.changes()}


async def _post_settings(wp: WordPressClient, values: dict[str, Any]) -> dict[str, Any]:
    saved = await wp.post("/wp/v2/settings", values, idempotent=True)
    return {key: saved.get(key) for key in values}


async def update_settings(
    params: UpdateSettingsParams, _c: ActionContext, services: ActionServices
) -> ActionResult:
    saved = await _post_settings(site(services), params.changes())
    return ActionResult(content=saved, summary=f"updated settings: {', '.join(saved)}")


async def restore_settings(
    snapshot: dict[str, Any], _data: Any, services: ActionServices
) -> ActionResult:
    saved = await _post_settings(site(services), snapshot)
    return ActionResult(content=saved, summary=f"restored settings: {', '.join(saved)}")


# -- themes -------------------------------------------------------------------------------------


async def list_themes(
    _params: NoParams, _c: ActionContext, services: ActionServices
) -> ActionResult:
    themes = [
        {
            "stylesheet": theme["stylesheet"],
            "name": rendered(theme.get("name")),
            "version": theme.get("version"),
            "active": theme.get("status") == "active",
        }
        for theme in await site(services).get("/wp/v2/themes", context="")
    ]
    current = next((t for t in themes if t["active"]), None)
    active = current["stylesheet"] if current else None
    # The name as the site shows it ("Twenty Twenty-Three"), not only its folder.
    shown = f"{current['name']} ({active})" if current else "none"
    return ActionResult(
        content={"active_theme": shown, "active": active, "themes": themes},
        summary=f"{len(themes)} themes, active: {shown}",
    )


_PLUGIN_DOC = ' Name it by its file id from list_plugins (e.g. "akismet/akismet") or its name.'

SETTINGS_PLUGIN_ACTIONS = (
    ActionSpec(
        name="list_plugins",
        description="List every installed plugin, active and inactive, with its status.",
        params=ListPluginsParams,
        risk=Risk.READ,
        untrusted_output=True,  # names and descriptions: third-party text
        handler=list_plugins,
    ),
    ActionSpec(
        name="activate_plugin",
        description="Activate a plugin that is already installed (no action installs new "
        "plugins)." + _PLUGIN_DOC,
        params=PluginParams,
        risk=Risk.WRITE,
        sensitive=True,
        changes_site_context=True,
        handler=_switch("active"),
        preview=_status_preview("active"),
        snapshot=status_before,
        undo=restore_status,
    ),
    ActionSpec(
        name="deactivate_plugin",
        description="Deactivate an active plugin." + _PLUGIN_DOC,
        params=PluginParams,
        risk=Risk.DESTRUCTIVE,
        sensitive=True,
        changes_site_context=True,
        handler=_switch("inactive"),
        preview=_status_preview("inactive"),
        snapshot=status_before,
        undo=restore_status,
    ),
    ActionSpec(
        name="delete_plugin",
        description="Delete an inactive plugin's files. Cannot be undone." + _PLUGIN_DOC,
        params=PluginParams,
        risk=Risk.DESTRUCTIVE,
        sensitive=True,
        changes_site_context=True,
        handler=delete_plugin,
        preview=delete_plugin_preview,
    ),
    ActionSpec(
        name="get_settings",
        description="Read the site's general settings (title, tagline, timezone, formats...).",
        params=NoParams,
        risk=Risk.READ,
        untrusted_output=True,
        handler=get_settings,
    ),
    ActionSpec(
        name="update_settings",
        description="Change site settings; only the fields given change.",
        params=UpdateSettingsParams,
        risk=Risk.DESTRUCTIVE,
        sensitive=changes_access,
        changes_site_context=True,
        handler=update_settings,
        preview=settings_preview,
        snapshot=settings_before,
        undo=restore_settings,
    ),
    ActionSpec(
        name="list_themes",
        description="List installed themes, with the active one marked.",
        params=NoParams,
        risk=Risk.READ,
        untrusted_output=True,
        handler=list_themes,
    ),
)

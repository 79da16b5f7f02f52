"""SITE_CONTEXT: what the agent should know about the site before it acts.

Name, URL, description, post types, plugins (name, file, active), themes and the active one, and
the palette from the active theme's global styles where the site has them. Cached for a few
minutes; actions that change any of it (plugins, themes, settings) clear the cache.
"""

from __future__ import annotations

import time
from typing import Any

from pydantic import BaseModel, ConfigDict

from pressloop.actions.registry import ActionResult, ActionServices, ActionSpec
from pressloop.actions.wordpress.client import WordPressClient
from pressloop.actions.wordpress.common import site
from pressloop.contracts import ActionContext, Risk
from pressloop.errors import ActionError

# Actions after which the cached context is stale.
CHANGES_CONTEXT = frozenset(
    {"activate_plugin", "deactivate_plugin", "delete_plugin", "update_settings"}
)


async def _optional(client: WordPressClient, path: str, params: dict[str, Any]) -> Any:
    """A part of the context the user may not be allowed to read: leave it out, don't fail."""
    try:
        return await client.get(path, params)
    except ActionError:
        return None


async def read_site_context(client: WordPressClient) -> dict[str, Any]:
    index = await client.get("/", None, context="view")
    types = await _optional(client, "/wp/v2/types", {})
    plugins = await _optional(client, "/wp/v2/plugins", {}) or []
    themes = await _optional(client, "/wp/v2/themes", {}) or []
    active = next((t for t in themes if t.get("status") == "active"), None)
    palette: list[dict[str, Any]] = []
    if active is not None:
        styles = await _optional(
            client, f"/wp/v2/global-styles/themes/{active.get('stylesheet')}", {}
        )
        colors = (((styles or {}).get("settings") or {}).get("color") or {}).get("palette")
        if isinstance(colors, dict):  # by origin: theme / default / custom
            colors = colors.get("theme") or colors.get("custom") or colors.get("default")
        palette = [
            {"name": c.get("name"), "color": c.get("color")}
            for c in (colors or [])
            if isinstance(c, dict)
        ][:12]
    return {
        "name": index.get("name"),
        "url": index.get("home") or index.get("url"),
        "description": index.get("description"),
        "post_types": sorted((types or {}).keys()),
        "plugins": [
            {
                "name": p.get("name"),
                "plugin": p.get("plugin"),
                "active": p.get("status") == "active",
            }
            for p in plugins
        ],
        "themes": [t.get("stylesheet") for t in themes],
        "active_theme": active.get("stylesheet") if active else None,
        "palette": palette,
    }


def render(context: dict[str, Any]) -> str:
    lines = [
        f"Site: {context.get('name')} ({context.get('url')})",
        f"Description: {context.get('description') or '-'}",
        f"Post types: {', '.join(context.get('post_types') or []) or '-'}",
        "Plugins: "
        + (
            "; ".join(
                f"{p['name']} [{p['plugin']}] {'active' if p['active'] else 'inactive'}"
                for p in context.get("plugins") or []
            )
            or "-"
        ),
        f"Themes: {', '.join(t for t in context.get('themes') or [] if t) or '-'}"
        f" (active: {context.get('active_theme') or '-'})",
    ]
    if context.get("palette"):
        lines.append(
            "Palette: " + ", ".join(f"{c['name']} {c['color']}" for c in context["palette"])
        )
    return "\n".join(lines)


class SiteContextCache:
    """One site's context, read at most every `ttl_s` seconds (or after a change)."""

    def __init__(self, ttl_s: float = 300.0) -> None:
        self.ttl_s = ttl_s
        self._text: str | None = None
        self._read_at = 0.0

    def clear(self) -> None:
        self._text = None

    async def text(self, client: WordPressClient) -> str:
        if self._text is None or time.monotonic() - self._read_at > self.ttl_s:
            try:
                self._text = render(await read_site_context(client))
            except ActionError as problem:  # the turn goes on; the agent learns why
                return f"(the site could not be read: {problem.message})"
            self._read_at = time.monotonic()
        return self._text


class NoParams(BaseModel):
    model_config = ConfigDict(extra="forbid")


async def get_site_context(
    _params: NoParams, _context: ActionContext, services: ActionServices
) -> ActionResult:
    context = await read_site_context(site(services))
    return ActionResult(content=context, summary=f"read the context of {context.get('name')}")


SITE_CONTEXT_ACTIONS = (
    ActionSpec(
        name="get_site_context",
        description="Read the site's name, URL, post types, plugins, themes and palette again.",
        params=NoParams,
        risk=Risk.READ,
        handler=get_site_context,
    ),
)

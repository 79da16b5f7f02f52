"""SITE_CONTEXT: what the agent should know about the site before it acts.

Name, URL, description, post types, plugins (file, active), themes and the active one, and the
palette from the active theme's global styles where the site has them. Cached for a few minutes
(`SiteContextCache`, the pack's `SiteContextSource`); actions that change any of it (plugins,
themes, settings) say so (`ActionSpec.changes_site_context`), and the runner invalidates it.

It sits in every system prompt, so it holds only what the owner sets (the site's name, address
and tagline, short) and identifiers (plugin files, theme and post type slugs, colours), never
third-party prose: plugin and theme names and descriptions are written by their authors, and
would otherwise reach every turn unmarked. `get_site_context`, with the names, is an untrusted
read like `list_plugins`.
"""

from __future__ import annotations

import re
import time
from typing import Any

from pydantic import BaseModel, ConfigDict

from pressloop.actions.registry import ActionResult, ActionServices, ActionSpec
from pressloop.actions.wordpress.client import WordPressClient
from pressloop.actions.wordpress.common import site
from pressloop.clock import Monotonic
from pressloop.contracts import ActionContext, Risk
from pressloop.errors import ActionError


async def _optional(client: WordPressClient, path: str, params: dict[str, Any]) -> Any:
    """A part of the context the user may not be allowed to read: leave it out, don't fail."""
    try:
        return await client.get(path, params)
    except ActionError:
        return None


async def read_site_context(client: WordPressClient) -> dict[str, Any]:
    # Signed in first: with a wrong Application Password WordPress answers the index as to an
    # anonymous visitor, and the parts below would quietly be left out. `whoami` fails with a
    # message naming PRESSLOOP_WP_USER and PRESSLOOP_WP_APP_PASSWORD instead.
    await client.whoami()
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


_NOT_SLUG = re.compile(r"[^a-z0-9._/-]+")
_NOT_WORD = re.compile(r"[^\w #(),.%-]+")


def _slug(value: Any) -> str:
    return _NOT_SLUG.sub("", str(value or "").lower())[:80]


def _word(value: Any, limit: int = 30) -> str:
    return " ".join(_NOT_WORD.sub(" ", str(value or "")).split())[:limit]


def _owner_text(value: Any, limit: int = 200) -> str:
    return " ".join(str(value or "").split())[:limit]


def render(context: dict[str, Any]) -> str:
    plugins = "; ".join(
        f"[{_slug(p.get('plugin'))}] {'active' if p.get('active') else 'inactive'}"
        for p in context.get("plugins") or []
    )
    themes = ", ".join(_slug(t) for t in context.get("themes") or [] if t)
    lines = [
        f"Site: {_owner_text(context.get('name'))} ({_owner_text(context.get('url'))})",
        f"Description: {_owner_text(context.get('description')) or '-'}",
        f"Post types: {', '.join(_slug(t) for t in context.get('post_types') or []) or '-'}",
        f"Plugins: {plugins or '-'}",
        f"Themes: {themes or '-'} (active: {_slug(context.get('active_theme')) or '-'})",
    ]
    if context.get("palette"):
        lines.append(
            "Palette: "
            + ", ".join(f"{_word(c['name'])} {_word(c['color'], 40)}" for c in context["palette"])
        )
    return "\n".join(lines)


class SiteContextCache:
    """One site's context, read at most every `ttl_s` seconds (or after a change): the WordPress
    pack's `SiteContextSource` (`pressloop.actions.site_context_port`)."""

    def __init__(
        self,
        client: WordPressClient,
        *,
        ttl_s: float = 300.0,
        monotonic: Monotonic = time.monotonic,
    ) -> None:
        self.client = client
        self.ttl_s = ttl_s
        self.monotonic = monotonic
        self._text: str | None = None
        self._read_at = 0.0

    def invalidate(self) -> None:
        self._text = None

    async def text(self) -> str:
        if self._text is None or self.monotonic() - self._read_at > self.ttl_s:
            try:
                self._text = render(await read_site_context(self.client))
            except ActionError as problem:  # the turn goes on; the agent learns why
                return f"(the site could not be read: {problem.message})"
            self._read_at = self.monotonic()
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
        untrusted_output=True,  # plugin and theme names: third-party text
        handler=get_site_context,
    ),
)

"""What a service is built from by default: the action catalog, the services the actions use,
and the configured provider."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from pressloop.actions.memory import MEMORY_ACTIONS
from pressloop.actions.registry import ActionServices, ActionSpec
from pressloop.actions.site_context_port import SiteContextSource
from pressloop.actions.spawn import SPAWN_ACTIONS
from pressloop.actions.web import WEB_ACTIONS, fetch_options
from pressloop.clock import Now
from pressloop.config import Settings
from pressloop.errors import ConfigurationError
from pressloop.providers.base import Provider
from pressloop.runtime.memory import StoreMemory
from pressloop.runtime.spawn import Spawner
from pressloop.store.db import Database


def default_actions(packs: str = "", *, wordpress: bool = False) -> list[ActionSpec]:
    """The built-in actions, the WordPress pack when a site is configured, and the packs named
    in PRESSLOOP_ACTION_PACKS."""
    actions: list[ActionSpec] = [*MEMORY_ACTIONS, *SPAWN_ACTIONS, *WEB_ACTIONS]
    if wordpress:
        from pressloop.actions.wordpress import WORDPRESS_ACTIONS

        actions.extend(WORDPRESS_ACTIONS)
    for module_name in filter(None, (p.strip() for p in packs.split(","))):
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise ConfigurationError(
                f"PRESSLOOP_ACTION_PACKS names {module_name!r}, which cannot be imported: {exc}"
            ) from exc
        actions.extend(getattr(module, "ACTIONS", ()))
    return actions


@dataclass(kw_only=True, frozen=True)
class ActionWiring:
    """What the runner hands the actions: the services, and the SITE_CONTEXT source of the
    configured site's pack (None without a site)."""

    services: ActionServices
    site_context: SiteContextSource | None = None

    async def aclose(self) -> None:
        """Close what holds connections (the site's REST client)."""
        if self.services.wordpress is not None:
            await self.services.wordpress.aclose()


def wire_actions(settings: Settings, database: Database, now: Now) -> ActionWiring:
    """The database-backed memory and spawner, the outbound rules (web_fetch, upload_media), and
    the WordPress pack's client and SITE_CONTEXT source when a site is configured."""
    site = None
    if settings.wp_url:
        from pressloop.actions.wordpress import WordPressSite

        site = WordPressSite.from_settings(settings)
    services = ActionServices(
        memory=StoreMemory(database, now),
        spawner=Spawner(database, now, max_attempts=settings.max_attempts),
        wordpress=site.client if site else None,
        web=fetch_options(settings),
    )
    return ActionWiring(services=services, site_context=site.site_context if site else None)


class CachedProvider:
    """Builds the configured provider once, on first use (its HTTP client pools connections);
    a missing configuration is reported on every turn until it is fixed."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.built: Provider | None = None

    def __call__(self) -> Provider:
        if self.built is None:
            from pressloop.providers.factory import build_provider

            self.built = build_provider(self.settings)
        return self.built

    async def aclose(self) -> None:
        close = getattr(self.built, "aclose", None)
        if close is not None:
            await close()


def cached_provider(settings: Settings) -> Callable[[], Provider]:
    return CachedProvider(settings)

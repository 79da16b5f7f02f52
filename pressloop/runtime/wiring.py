"""What a service is built from by default: the action catalog and the configured provider."""

from __future__ import annotations

import importlib
from collections.abc import Callable

from pressloop.actions.memory import MEMORY_ACTIONS
from pressloop.actions.registry import ActionSpec
from pressloop.actions.spawn import SPAWN_ACTIONS
from pressloop.actions.web import WEB_ACTIONS
from pressloop.config import Settings
from pressloop.errors import ConfigurationError
from pressloop.providers.base import Provider


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

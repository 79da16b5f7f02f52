"""What every WordPress action shares: the client, and small helpers for results."""

from __future__ import annotations

from typing import Any

from pressloop.actions.registry import ActionServices
from pressloop.actions.wordpress.client import WordPressClient
from pressloop.errors import ActionError


def site(services: ActionServices) -> WordPressClient:
    """The site's REST client, or a clear error when no site is configured."""
    if services.wordpress is None:
        raise ActionError(
            "no WordPress site is configured: set PRESSLOOP_WP_URL, PRESSLOOP_WP_USER and "
            "PRESSLOOP_WP_APP_PASSWORD"
        )
    return services.wordpress


def rendered(value: Any) -> Any:
    """WordPress answers `{"raw": ..., "rendered": ...}` for titles and content with
    context=edit; the raw text is what the agent wrote and what undo restores."""
    if isinstance(value, dict):
        return value.get("raw", value.get("rendered"))
    return value

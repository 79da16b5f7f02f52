"""When a network action is sensitive: a request to a host the owner has not allowed.

A network action (`ActionSpec.network`) names where it goes in its `url` param; with no URL (an
upload from bytes) it reaches nothing. The allowlist is PRESSLOOP_NET_ALLOW, put in
`ActionServices.extra["net_allow"]` by the runtime (`actions/web.fetch_options`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pressloop.actions.registry import ActionServices


def reaches_unallowed_host(params: Any, services: ActionServices) -> bool:
    # Imported here: `actions.net` needs the registry, which asks this module.
    from pressloop.actions.net.allowlist import host_allowed

    url = getattr(params, "url", None)
    if not isinstance(url, str) or not url:
        return False
    return not host_allowed(url, services.extra.get("net_allow", ()))

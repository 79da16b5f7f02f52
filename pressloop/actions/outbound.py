"""Outbound requests the agent makes (web_fetch, upload_media from a URL): the owner's rules for
them (`FetchOptions`, in `ActionServices.web`), and when a network action is sensitive.

A network action (`ActionSpec.network`) names where it goes in its `url` param; with no URL (an
upload from bytes) it reaches nothing. It is sensitive when that host is not on the owner's
allowlist (PRESSLOOP_NET_ALLOW).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pressloop.actions.net.pinned import Resolver
    from pressloop.actions.registry import ActionServices

DEFAULT_TIMEOUT_S = 15.0  # PRESSLOOP_WEB_FETCH_TIMEOUT
DEFAULT_MAX_FILE_BYTES = 20 * 1024 * 1024  # PRESSLOOP_MEDIA_MAX_BYTES


@dataclass(kw_only=True, frozen=True)
class FetchOptions:
    """What actions may fetch from the web; the runtime builds it from Settings
    (`pressloop.actions.web.fetch_options`)."""

    allow_private: bool = False  # PRESSLOOP_WEB_FETCH_ALLOW_PRIVATE
    allowlist: tuple[str, ...] = ()  # PRESSLOOP_NET_ALLOW, parsed
    timeout_s: float = DEFAULT_TIMEOUT_S
    # The largest file an action takes in (upload_media, from a URL or as bytes).
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    # How host names are resolved; None: the system's resolver (tests answer with their own).
    resolver: Resolver | None = None


def reaches_unallowed_host(params: Any, services: ActionServices) -> bool:
    # Imported here: `actions.net` needs the registry, which asks this module.
    from pressloop.actions.net.allowlist import host_allowed

    url = getattr(params, "url", None)
    if not isinstance(url, str) or not url:
        return False
    return not host_allowed(url, services.web.allowlist)

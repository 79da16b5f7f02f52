"""The owner's network allowlist (PRESSLOOP_NET_ALLOW): hosts the agent may reach freely.

An entry is a host (`example.com`: that host only) or a suffix (`.wordpress.org`: that domain and
every name under it); IP literals are hosts (`203.0.113.5`, `[2001:db8::1]`). Ports are ignored;
case, a trailing dot and internationalised names are compared as the request would send them
(ASCII, punycode), with httpx's URL parser, the one that fetches: `http://example.com@evil.test/`
is a request to evil.test.
"""

from __future__ import annotations

from collections.abc import Iterable

import httpx


def parse_allowlist(text: str) -> tuple[str, ...]:
    """`" example.com, .WordPress.org ,"` -> `("example.com", ".wordpress.org")`."""
    return tuple(entry.strip().lower() for entry in text.split(",") if entry.strip())


def host_allowed(url: str, allowlist: Iterable[str]) -> bool:
    """Whether `url` is an http(s) URL whose host is on `allowlist`; never raises."""
    host = _url_host(url)
    if host is None:
        return False
    for entry in allowlist:
        suffix = entry.strip().startswith(".")
        allowed = _entry_host(entry.strip().lstrip("."))
        if allowed is None:
            continue
        if host == allowed or (suffix and host.endswith("." + allowed)):
            return True
    return False


def _url_host(url: str) -> str | None:
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError):
        return None
    if parsed.scheme not in ("http", "https"):
        return None
    return _normal(parsed.raw_host)


def _entry_host(entry: str) -> str | None:
    if not entry:
        return None
    if entry.count(":") > 1 and not entry.startswith("["):
        entry = f"[{entry}]"  # a bare IPv6 literal
    try:
        return _normal(httpx.URL(f"http://{entry}/").raw_host)
    except (httpx.InvalidURL, TypeError, ValueError):
        return None


def _normal(raw_host: bytes) -> str | None:
    host = raw_host.decode("ascii", errors="replace").lower().rstrip(".")
    return host or None

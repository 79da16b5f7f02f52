"""GET a URL for an action under the outbound rules: the one way actions read the web.

Every connection goes through `PinnedTransport` (resolve once, check every address, connect to
the checked one); redirects are followed by hand, at most `max_redirects` of them, each hop's URL
checked again. A request that starts on a host of the owner's allowlist stays on it: a redirect
elsewhere is refused, since no one approved that host. `Fetched.host_allowed` says whether every
host reached was on the allowlist.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from functools import cache

import httpcore
import httpx

from pressloop.actions.net.allowlist import host_allowed
from pressloop.actions.net.pinned import Resolver, system_resolver
from pressloop.actions.net.transport import PinnedTransport
from pressloop.actions.outbound import DEFAULT_TIMEOUT_S, FetchOptions
from pressloop.actions.registry import ActionServices
from pressloop.errors import ActionError

MAX_REDIRECTS = 5


@dataclass(kw_only=True, frozen=True)
class NetRules:
    allow_private: bool = False  # PRESSLOOP_WEB_FETCH_ALLOW_PRIVATE
    allowlist: tuple[str, ...] = ()  # PRESSLOOP_NET_ALLOW
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_redirects: int = MAX_REDIRECTS
    resolver: Resolver = system_resolver
    ssl_context: ssl.SSLContext | None = None  # None: the usual trusted CAs (certifi)
    dial: httpcore.AsyncNetworkBackend | None = None  # None: real TCP connections


def rules_from(options: FetchOptions) -> NetRules:
    """The rules the runtime put in `ActionServices.web` (`pressloop.actions.web.fetch_options`)."""
    return NetRules(
        allow_private=options.allow_private,
        allowlist=options.allowlist,
        timeout_s=options.timeout_s,
        resolver=options.resolver or system_resolver,
    )


@dataclass(kw_only=True, frozen=True)
class Fetched:
    url: str  # after redirects
    status: int
    content_type: str
    encoding: str | None
    body: bytes
    truncated: bool
    host_allowed: bool  # every host reached is on the allowlist


@cache
def _trusted_cas() -> ssl.SSLContext:
    return httpx.create_ssl_context(trust_env=False)


def _checked(url: str, *, stay_allowed: bool, allowlist: tuple[str, ...]) -> httpx.URL:
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise ActionError(f"not a valid URL: {url!r} ({exc})") from exc
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise ActionError(f"only http and https URLs can be fetched, not {url!r}")
    if stay_allowed and not host_allowed(url, allowlist):
        raise ActionError(
            f"refused: a host on PRESSLOOP_NET_ALLOW redirected to {parsed.host}, "
            "which is not on it"
        )
    return parsed


async def fetch(url: str, rules: NetRules, *, max_bytes: int, cut: bool) -> Fetched:
    """GET `url`; read at most `max_bytes`: a longer body is cut there (`cut`, for pages) or
    refused (for files)."""
    allowed = host_allowed(url, rules.allowlist)
    transport = PinnedTransport(
        resolver=rules.resolver,
        allow_private=rules.allow_private,
        ssl_context=rules.ssl_context or _trusted_cas(),
        dial=rules.dial,
    )
    async with httpx.AsyncClient(
        transport=transport, timeout=rules.timeout_s, follow_redirects=False, trust_env=False
    ) as web:
        for _hop in range(rules.max_redirects + 1):
            target = _checked(url, stay_allowed=allowed, allowlist=rules.allowlist)
            try:
                async with web.stream("GET", target) as response:
                    if response.is_redirect and "location" in response.headers:
                        url = _joined(target, response.headers["location"])
                        continue
                    return await _read(response, url, max_bytes=max_bytes, cut=cut, allowed=allowed)
            except httpx.HTTPError as exc:
                raise ActionError(f"fetching {url} failed: {exc}", retryable=False) from exc
    raise ActionError(f"{url} redirected more than {rules.max_redirects} times")


async def fetch_public(url: str, services: ActionServices, *, max_bytes: int, cut: bool) -> Fetched:
    """`fetch` under the rules the runtime put in `services.web`."""
    return await fetch(url, rules_from(services.web), max_bytes=max_bytes, cut=cut)


def _joined(base: httpx.URL, location: str) -> str:
    try:
        return str(base.join(location))
    except httpx.InvalidURL as exc:
        raise ActionError(f"{base} redirected to an invalid URL {location!r}") from exc


async def _read(
    response: httpx.Response, url: str, *, max_bytes: int, cut: bool, allowed: bool
) -> Fetched:
    too_big = f"{url} is larger than the limit of {max_bytes} bytes (PRESSLOOP_MEDIA_MAX_BYTES)"
    if response.status_code >= 400:
        raise ActionError(f"{url} answered {response.status_code}")
    declared = response.headers.get("content-length", "")
    if not cut and declared.isdigit() and int(declared) > max_bytes:
        raise ActionError(too_big)  # not even downloaded
    body, truncated = bytearray(), False
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > max_bytes:
            if not cut:
                raise ActionError(too_big)
            del body[max_bytes:]
            truncated = True
            break
    return Fetched(
        url=url,
        status=response.status_code,
        content_type=response.headers.get("content-type", ""),
        encoding=response.charset_encoding,
        body=bytes(body),
        truncated=truncated,
        host_allowed=allowed,
    )

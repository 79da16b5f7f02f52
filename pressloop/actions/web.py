"""`web_fetch`: read a web page for the agent, as untrusted text.

Private, loopback and link-local addresses are refused (the agent must not reach the server's
own network) unless PRESSLOOP_WEB_FETCH_ALLOW_PRIVATE is set; every address a name resolves to is
checked, and redirects are followed by hand so each hop is checked too. `fetch_public` is the
one way actions read the web: `upload_media` from a URL goes through it as well.
"""

from __future__ import annotations

import asyncio
import html
import ipaddress
import re
import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx
from pydantic import BaseModel, ConfigDict, Field

from pressloop.actions.registry import ActionResult, ActionServices, ActionSpec
from pressloop.config import Settings
from pressloop.contracts import ActionContext, Risk
from pressloop.errors import ActionError

MAX_BYTES = 2_000_000  # of a page read by web_fetch; the rest is cut
DEFAULT_TIMEOUT_S = 15.0  # PRESSLOOP_WEB_FETCH_TIMEOUT
MAX_TEXT = 20_000
MAX_REDIRECTS = 5
_TAGS = re.compile(r"<(script|style)[^>]*>.*?</\1>|<[^>]+>", re.IGNORECASE | re.DOTALL)


class FetchParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    url: str = Field(max_length=2000, description="An http(s) URL to read.")


async def _check_address(url: str, allow_private: bool) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ActionError(f"only http and https URLs can be fetched, not {url!r}")
    if allow_private:
        return
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(
            parts.hostname,
            parts.port or (443 if parts.scheme == "https" else 80),
            type=socket.SOCK_STREAM,
        )
    except OSError as exc:
        raise ActionError(f"cannot resolve {parts.hostname}: {exc}") from exc
    for info in infos:
        address = ipaddress.ip_address(info[4][0])
        if not address.is_global:
            raise ActionError(
                f"refused: {parts.hostname} is a private or loopback address ({address}); "
                "set PRESSLOOP_WEB_FETCH_ALLOW_PRIVATE=1 to allow it"
            )


def page_text(body: str) -> str:
    return " ".join(html.unescape(_TAGS.sub(" ", body)).split())[:MAX_TEXT]


@dataclass(kw_only=True, frozen=True)
class Fetched:
    url: str  # after redirects
    status: int
    content_type: str
    encoding: str | None
    body: bytes
    truncated: bool


def fetch_options(settings: Settings) -> dict[str, Any]:
    """What the runtime puts in `ActionServices.extra` for web_fetch and upload_media."""
    return {
        "web_fetch_allow_private": settings.web_fetch_allow_private,
        "web_fetch_timeout_s": settings.web_fetch_timeout_s,
        "media_max_bytes": settings.media_max_bytes,
    }


async def fetch_public(url: str, services: ActionServices, *, max_bytes: int, cut: bool) -> Fetched:
    """GET `url` under web_fetch's rules (every hop's address checked); read at most
    `max_bytes`: a longer body is cut there (`cut`, for pages) or refused (for files)."""
    allow_private = bool(services.extra.get("web_fetch_allow_private"))
    timeout_s = float(services.extra.get("web_fetch_timeout_s", DEFAULT_TIMEOUT_S))
    too_big = f"{{}} is larger than the limit of {max_bytes} bytes (PRESSLOOP_MEDIA_MAX_BYTES)"
    async with httpx.AsyncClient(timeout=timeout_s, follow_redirects=False, trust_env=False) as web:
        for _hop in range(MAX_REDIRECTS + 1):
            await _check_address(url, allow_private)
            try:
                async with web.stream("GET", url) as response:
                    if response.is_redirect and "location" in response.headers:
                        url = urljoin(url, response.headers["location"])
                        continue
                    if response.status_code >= 400:
                        raise ActionError(f"{url} answered {response.status_code}")
                    declared = response.headers.get("content-length", "")
                    if not cut and declared.isdigit() and int(declared) > max_bytes:
                        raise ActionError(too_big.format(url))  # not even downloaded
                    body, truncated = bytearray(), False
                    async for chunk in response.aiter_bytes():
                        body += chunk
                        if len(body) > max_bytes:
                            if not cut:
                                raise ActionError(too_big.format(url))
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
                    )
            except httpx.HTTPError as exc:
                raise ActionError(f"fetching {url} failed: {exc}", retryable=False) from exc
    raise ActionError(f"{url} redirected more than {MAX_REDIRECTS} times")


async def web_fetch(
    params: FetchParams, _context: ActionContext, services: ActionServices
) -> ActionResult:
    page = await fetch_public(params.url, services, max_bytes=MAX_BYTES, cut=True)
    body = page.body.decode(page.encoding or "utf-8", errors="replace")
    text = page_text(body) if "html" in page.content_type else body[:MAX_TEXT]
    return ActionResult(
        content={
            "url": page.url,
            "status": page.status,
            "content_type": page.content_type,
            "text": text,
        },
        summary=f"read {page.url} ({len(text)} characters)",
        untrusted=True,
    )


WEB_ACTIONS = (
    ActionSpec(
        name="web_fetch",
        description="Read a public web page (text only). Its content is untrusted.",
        params=FetchParams,
        risk=Risk.READ,
        handler=web_fetch,
        network=True,
    ),
)

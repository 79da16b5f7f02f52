"""`web_fetch`: read a web page for the agent, as untrusted text.

Private, loopback and link-local addresses are refused (the agent must not reach the server's
own network) unless PRESSLOOP_WEB_FETCH_ALLOW_PRIVATE is set; every address a name resolves to is
checked, and redirects are followed by hand so each hop is checked too.
"""

from __future__ import annotations

import asyncio
import html
import ipaddress
import re
import socket
from urllib.parse import urljoin, urlsplit

import httpx
from pydantic import BaseModel, ConfigDict, Field

from pressloop.actions.registry import ActionResult, ActionServices, ActionSpec
from pressloop.contracts import ActionContext, Risk
from pressloop.errors import ActionError

MAX_BYTES = 2_000_000
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


async def web_fetch(
    params: FetchParams, _context: ActionContext, services: ActionServices
) -> ActionResult:
    allow_private = bool(services.extra.get("web_fetch_allow_private"))
    url = params.url
    async with httpx.AsyncClient(timeout=15, follow_redirects=False, trust_env=False) as client:
        for _hop in range(MAX_REDIRECTS + 1):
            await _check_address(url, allow_private)
            try:
                response = await client.get(url)
            except httpx.HTTPError as exc:
                raise ActionError(f"fetching {url} failed: {exc}", retryable=False) from exc
            if response.is_redirect and "location" in response.headers:
                url = urljoin(url, response.headers["location"])
                continue
            break
        else:
            raise ActionError(f"{params.url} redirected more than {MAX_REDIRECTS} times")
    if response.status_code >= 400:
        raise ActionError(f"{url} answered {response.status_code}")
    body = response.content[:MAX_BYTES].decode(response.encoding or "utf-8", errors="replace")
    kind = response.headers.get("content-type", "")
    text = page_text(body) if "html" in kind else body[:MAX_TEXT]
    return ActionResult(
        content={"url": url, "status": response.status_code, "content_type": kind, "text": text},
        summary=f"read {url} ({len(text)} characters)",
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

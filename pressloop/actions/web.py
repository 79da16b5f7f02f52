"""`web_fetch`: read a web page for the agent, as untrusted text.

The fetching itself is `pressloop.actions.net` (shared with `upload_media` from a URL): only
public addresses unless PRESSLOOP_WEB_FETCH_ALLOW_PRIVATE is set, every address a name resolves
to checked and the connection made to the checked address (no second resolution), redirects
followed by hand with each hop checked. The result says whether the host is on the owner's
allowlist (PRESSLOOP_NET_ALLOW).
"""

from __future__ import annotations

import html
import re

from pydantic import BaseModel, ConfigDict, Field

from pressloop.actions.net import fetch_public, parse_allowlist
from pressloop.actions.outbound import FetchOptions
from pressloop.actions.registry import ActionResult, ActionServices, ActionSpec
from pressloop.config import Settings
from pressloop.contracts import ActionContext, Risk

MAX_BYTES = 2_000_000  # of a page read by web_fetch; the rest is cut
MAX_TEXT = 20_000
_TAGS = re.compile(r"<(script|style)[^>]*>.*?</\1>|<[^>]+>", re.IGNORECASE | re.DOTALL)


class FetchParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    url: str = Field(max_length=2000, description="An http(s) URL to read.")


def page_text(body: str) -> str:
    return " ".join(html.unescape(_TAGS.sub(" ", body)).split())[:MAX_TEXT]


def fetch_options(settings: Settings) -> FetchOptions:
    """What the runtime puts in `ActionServices.web` for web_fetch and upload_media."""
    return FetchOptions(
        allow_private=settings.web_fetch_allow_private,
        allowlist=parse_allowlist(settings.net_allow),
        timeout_s=settings.web_fetch_timeout_s,
        max_file_bytes=settings.media_max_bytes,
    )


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
            "host_allowed": page.host_allowed,  # on PRESSLOOP_NET_ALLOW
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

"""Templates and the context every page shares (who is signed in, what they may do, the nav)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.templating import Jinja2Templates
from starlette.responses import Response

from pressloop.api.auth import service_of
from pressloop.store.records import TokenRecord
from pressloop.ui.session import abilities

TEMPLATES = Jinja2Templates(directory=Path(__file__).parent / "templates")

NAV = (
    ("chat", "Chat", "/ui/chat"),
    ("threads", "Threads", "/ui/threads"),
    ("runs", "Runs", "/ui/runs"),
    ("approvals", "Approvals", "/ui/approvals"),
    ("schedules", "Schedules", "/ui/schedules"),
    ("usage", "Usage", "/ui/usage"),
    ("settings", "Settings", "/ui/settings"),
)


def _when(value: datetime | None) -> str:
    """A UTC time as the page shows it (scripts turn it into the reader's local time)."""
    if value is None:
        return "—"
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _iso(value: datetime | None) -> str:
    return "" if value is None else value.astimezone(UTC).isoformat()


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str, sort_keys=True)


def _short(value: Any, length: int = 80) -> str:
    text = "" if value is None else str(value)
    return text if len(text) <= length else text[: length - 1] + "…"


TEMPLATES.env.filters.update(when=_when, iso=_iso, pretty=_pretty, short=_short)


async def page(
    request: Request, template: str, user: TokenRecord, active: str, **context: Any
) -> Response:
    """Render one UI page with the shared context."""
    service = service_of(request)
    pending = await service.approvals.find(status="pending", limit=100)
    return TEMPLATES.TemplateResponse(
        request,
        template,
        {
            "user": user,
            "nav": NAV,
            "active": active,
            "pending_approvals": len(pending),
            **abilities(user),
            **context,
        },
    )

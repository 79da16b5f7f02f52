"""Daily budgets and the per-user cooldown (DESIGN.md section 6). A refusal is clear (which
budget, how much is used, when it resets) and counted in the daily usage; `budget_gate.py`
checks the budgets before a new turn is stored and before each model call and action."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from pressloop.config import Settings
from pressloop.contracts import Trigger, Usage
from pressloop.errors import RateLimited
from pressloop.store import runs as run_store
from pressloop.store import usage as usage_store

# Messages from people are rate-limited; heartbeats and spawned agents have their own limits.
PEOPLE = (Trigger.CHAT.value, Trigger.API.value, Trigger.MCP.value)


def site_subject(settings: Settings) -> str:
    return settings.wp_url or "default"


Subject = tuple[str, str]  # ("user", name) | ("site", address)
ACTIONS, TOKENS = "actions", "tokens"


@dataclass(kw_only=True)
class Used:
    """Today's use of one subject's budget."""

    actions: int = 0
    tokens: int = 0

    def add(self, usage: Usage) -> None:
        self.actions += usage.action_calls
        self.tokens += usage.total_tokens


@dataclass(kw_only=True, frozen=True)
class Refusal:
    """Which budget is used up, said for people, and the seconds until it resets."""

    message: str
    retry_after_s: float


def budget_subjects(settings: Settings, user: str | None) -> list[Subject]:
    """The budgets a run of `user` spends: the site's, and the user's when there is one."""
    return [("site", site_subject(settings))] + ([("user", user)] if user else [])


async def usage_rows(
    conn: AsyncConnection, settings: Settings, *, users: set[str | None], day: str
) -> list[dict[str, Any]]:
    """Today's counters of the site and of `users` (those the budgets look at), one query."""
    subjects: list[Subject] = [("site", site_subject(settings))]
    subjects += [("user", user) for user in sorted(u for u in users if u)]
    return await usage_store.usage_on_day(conn, day=day, subjects=subjects)


def stored_use(rows: list[dict[str, Any]]) -> dict[Subject, Used]:
    """The counters of `usage_rows` by subject."""
    return {
        (row["scope"], row["subject"]): Used(
            actions=row["action_calls"], tokens=row["input_tokens"] + row["output_tokens"]
        )
        for row in rows
    }


def seconds_to_reset(now: datetime) -> float:
    """Budgets are per UTC day: the seconds until the next midnight UTC."""
    utc = now.astimezone(UTC)
    midnight = datetime.combine(utc.date() + timedelta(days=1), time(), tzinfo=UTC)
    return (midnight - utc).total_seconds()


def _in(seconds: float) -> str:
    minutes = max(1, math.ceil(seconds / 60))
    return f"{minutes // 60} h {minutes % 60} min" if minutes >= 60 else f"{minutes} min"


def budget_refusal(
    used: dict[Subject, Used],
    settings: Settings,
    user: str | None,
    *,
    now: datetime | None,
    kinds: frozenset[str] = frozenset({ACTIONS, TOKENS}),
) -> Refusal | None:
    """Why a run of `user` may not go on (`kinds`: the budgets to look at), given today's use;
    None if both the user's and the site's budgets have room. `now` says when it resets."""
    limits = {
        "user": (settings.budget_user_actions, settings.budget_user_tokens),
        "site": (settings.budget_site_actions, settings.budget_site_tokens),
    }
    wait_s = seconds_to_reset(now) if now is not None else 0.0
    resets = "it resets at midnight UTC" + (f", in {_in(wait_s)}" if now is not None else "")
    for scope, subject in budget_subjects(settings, user):
        spent = used.get((scope, subject), Used())
        actions_limit, tokens_limit = limits[scope]
        who = f"user {subject}" if scope == "user" else "the site"
        if ACTIONS in kinds and actions_limit and spent.actions >= actions_limit:
            return Refusal(
                message=f"the daily action budget of {who} is used up ({spent.actions} of "
                f"{actions_limit} actions today); {resets}",
                retry_after_s=wait_s,
            )
        if TOKENS in kinds and tokens_limit and spent.tokens >= tokens_limit:
            return Refusal(
                message=f"the daily token budget of {who} is used up ({spent.tokens} of "
                f"{tokens_limit} tokens today); {resets}",
                retry_after_s=wait_s,
            )
    return None


async def check_cooldown(
    conn: AsyncConnection,
    settings: Settings,
    *,
    user: str | None,
    trigger: Trigger,
    now: datetime,
) -> None:
    """Refuse a person's message that comes sooner than the cooldown after their last one."""
    if not user or not settings.cooldown_s or trigger.value not in PEOPLE:
        return
    last = await run_store.last_run_created_at(conn, requesting_user=user, triggers=PEOPLE)
    if last is None:
        return
    waited = (now - last).total_seconds()
    if waited < settings.cooldown_s:
        raise RateLimited(
            f"{user} sent a message {waited:.1f} s ago; wait {settings.cooldown_s:g} s between "
            "messages (PRESSLOOP_COOLDOWN)",
            retry_after_s=settings.cooldown_s - waited,
        )

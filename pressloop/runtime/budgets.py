"""Daily budgets and the per-user cooldown (DESIGN.md section 6), checked before the model is
called. A refusal is clear (which budget, how much is used) and counted in the daily usage."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from pressloop.config import Settings
from pressloop.contracts import Trigger
from pressloop.errors import BudgetExceeded, RateLimited
from pressloop.store.schema import runs, usage_daily

# Messages from people are rate-limited; heartbeats and spawned agents have their own limits.
PEOPLE = (Trigger.CHAT.value, Trigger.API.value, Trigger.MCP.value)


def site_subject(settings: Settings) -> str:
    return settings.wp_url or "default"


async def check_budgets(
    conn: AsyncConnection, settings: Settings, *, user: str | None, day: str
) -> None:
    """Raise BudgetExceeded if today's actions or tokens are used up for the user or the site."""
    rows = await usage_rows(conn, settings, users={user}, day=day)
    refusal = budget_refusal(rows, settings, user)
    if refusal is not None:
        raise refusal


async def usage_rows(
    conn: AsyncConnection, settings: Settings, *, users: set[str | None], day: str
) -> list[sa.Row[Any]]:
    """Today's counters of the site and of `users` (those the budgets look at), one query."""
    subjects = [("site", site_subject(settings))]
    subjects += [("user", user) for user in sorted(u for u in users if u)]
    return list(
        (
            await conn.execute(
                sa.select(usage_daily).where(
                    usage_daily.c.day == day,
                    sa.or_(
                        *(
                            sa.and_(usage_daily.c.scope == scope, usage_daily.c.subject == subject)
                            for scope, subject in subjects
                        )
                    ),
                )
            )
        ).all()
    )


def budget_refusal(
    rows: list[sa.Row[Any]], settings: Settings, user: str | None
) -> BudgetExceeded | None:
    """The refusal for a run of `user`, given today's counters (`usage_rows`); None if both the
    user's and the site's budgets have room."""
    limits = {
        "user": (settings.budget_user_actions, settings.budget_user_tokens),
        "site": (settings.budget_site_actions, settings.budget_site_tokens),
    }
    site = site_subject(settings)
    for row in rows:
        if (row.scope, row.subject) not in (("site", site), ("user", user)):
            continue
        actions_limit, tokens_limit = limits[row.scope]
        tokens = row.input_tokens + row.output_tokens
        who = f"user {row.subject}" if row.scope == "user" else "the site"
        if actions_limit and row.action_calls >= actions_limit:
            return BudgetExceeded(
                f"the daily action budget of {who} is used up ({row.action_calls} of "
                f"{actions_limit} actions today); it resets at midnight UTC"
            )
        if tokens_limit and tokens >= tokens_limit:
            return BudgetExceeded(
                f"the daily token budget of {who} is used up ({tokens} of {tokens_limit} tokens "
                "today); it resets at midnight UTC"
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
    last = (
        await conn.execute(
            sa.select(sa.func.max(runs.c.created_at)).where(
                runs.c.requesting_user == user, runs.c.trigger.in_(PEOPLE)
            )
        )
    ).scalar_one()
    if last is None:
        return
    if last.tzinfo is None:  # SQLite's max() gives the stored value back without its type
        last = last.replace(tzinfo=UTC)
    waited = (now - last).total_seconds()
    if waited < settings.cooldown_s:
        raise RateLimited(
            f"{user} sent a message {waited:.1f} s ago; wait {settings.cooldown_s:g} s between "
            "messages (PRESSLOOP_COOLDOWN)",
            retry_after_s=settings.cooldown_s - waited,
        )

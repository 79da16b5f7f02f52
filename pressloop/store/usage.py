"""Daily usage counters per user and per site (the ground for budgets and the usage page)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from pressloop.contracts import Usage
from pressloop.store.schema import usage_daily

COUNTERS = ("input_tokens", "output_tokens", "model_calls", "action_calls", "runs", "refusals")


async def add_usage(
    conn: AsyncConnection,
    *,
    day: str,
    subjects: dict[str, str],
    usage: Usage,
    runs: int = 1,
    refusals: int = 0,
) -> None:
    """Add `usage` to today's counters of each scope -> subject (e.g. user and site), in one
    statement."""
    rows: list[dict[str, Any]] = [
        {
            "day": day,
            "scope": scope,
            "subject": subject,
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "model_calls": usage.model_calls,
            "action_calls": usage.action_calls,
            "runs": runs,
            "refusals": refusals,
        }
        for scope, subject in subjects.items()
    ]
    insert = (postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert)(
        usage_daily
    ).values(rows)
    await conn.execute(
        insert.on_conflict_do_update(
            index_elements=["day", "scope", "subject"],
            set_={c: usage_daily.c[c] + insert.excluded[c] for c in COUNTERS},
        )
    )


async def list_usage(
    conn: AsyncConnection, *, since_day: str, scope: str | None = None
) -> list[dict[str, Any]]:
    query = (
        sa.select(usage_daily)
        .where(usage_daily.c.day >= since_day)
        .order_by(usage_daily.c.day, usage_daily.c.scope, usage_daily.c.subject)
    )
    if scope is not None:
        query = query.where(usage_daily.c.scope == scope)
    return [dict(r._mapping) for r in (await conn.execute(query)).all()]


async def usage_on_day(
    conn: AsyncConnection, *, day: str, subjects: Sequence[tuple[str, str]]
) -> list[dict[str, Any]]:
    """The day's counter rows of these (scope, subject) pairs, in one query."""
    query = sa.select(usage_daily).where(
        usage_daily.c.day == day,
        sa.or_(
            *(
                sa.and_(usage_daily.c.scope == scope, usage_daily.c.subject == subject)
                for scope, subject in subjects
            )
        ),
    )
    return [dict(row._mapping) for row in (await conn.execute(query)).all()]

"""Claims: which queued runs may start now, and taking them with a fresh lease.

A run may start when it is due, its thread is idle (nothing running or waiting for approval)
and it is first in its thread's queue. PostgreSQL hands candidates to one worker each
(`FOR UPDATE SKIP LOCKED`); the partial unique index refuses a second running run per thread
whatever happens; a lost race leaves the claimer with nothing, never with a broken transaction.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from pressloop.contracts import ErrorInfo, RunStatus
from pressloop.store.id_lists import among
from pressloop.store.records import Claim
from pressloop.store.runs import BUSY_STATUSES, to_record
from pressloop.store.schema import UTCDateTime, runs

# A thread's runs that decide what it runs next.
ACTIVE_STATUSES = (RunStatus.QUEUED.value, *BUSY_STATUSES)


def _head_of_thread() -> Any:
    """The run that goes next on this run's thread: its busy run if it has one (running or
    waiting for approval), else its first queued run (ties broken by the time-ordered id).

    One correlated lookup by thread per candidate (the thread's index), so the plan stays
    cheap whatever the planner knows: two NOT EXISTS clauses, on a table PostgreSQL had not
    analysed yet, became a nested loop over every queued run for every candidate (0.3 s for a
    claim among 1,000 queued runs).
    """
    other = runs.alias("other")
    return (
        sa.select(other.c.id)
        .where(other.c.thread_id == runs.c.thread_id, other.c.status.in_(ACTIVE_STATUSES))
        # Busy runs sort first (the comparison is false for them), then queue order.
        .order_by(other.c.status == RunStatus.QUEUED.value, other.c.created_at, other.c.id)
        .limit(1)
        .scalar_subquery()
    )


def _claimed(owner: Any, expires: Any, now: Any) -> dict[str, Any]:
    """What a claim sets: running, a fresh lease with the next fencing token (values, or
    bound parameters for a statement built once)."""
    return {
        "status": RunStatus.RUNNING.value,
        "lease_owner": owner,
        "lease_token": runs.c.lease_token + 1,
        "lease_expires_at": expires,
        "attempt": sa.case((runs.c.attempt == 0, 1), else_=runs.c.attempt),
        "started_at": sa.func.coalesce(runs.c.started_at, now),
        "updated_at": now,
    }


# The chat path claims one named run per turn: its statement is built once (store/db.py). The
# UPDATE locks the row itself, and the conditions are those of `_CANDIDATES`.
_NOW = sa.bindparam("b_now", type_=UTCDateTime)
_CLAIM_ONE = (
    sa.update(runs)
    .where(
        runs.c.id == sa.bindparam("b_id"),
        runs.c.status == RunStatus.QUEUED.value,
        runs.c.not_before <= _NOW,
        runs.c.id == _head_of_thread(),
    )
    .values(**_claimed(sa.bindparam("b_owner"), sa.bindparam("b_expires", type_=UTCDateTime), _NOW))
    .returning(*runs.c)
)


# Queued runs that may start now: due, and next on their thread (so the thread is idle and the
# candidates are all on different threads). Every worker looks for them on every poll, idle or
# not (`Worker.tick`): the statement is built once (store/db.py), in both forms (PostgreSQL
# hands each candidate to one worker).
_CANDIDATES = (
    sa.select(runs.c.id)
    .where(runs.c.status == RunStatus.QUEUED.value, runs.c.not_before <= _NOW)
    .where(runs.c.id == _head_of_thread())
    .order_by(runs.c.not_before, runs.c.created_at, runs.c.id)
    .limit(sa.bindparam("b_limit"))
)
_CANDIDATES_LOCKED = _CANDIDATES.with_for_update(skip_locked=True, of=runs)


# What no notification announces (`store/notify.py`): the next queued run's backoff ending, the
# next lease expiring (its worker may have died). Built once (store/db.py): an idle worker on
# PostgreSQL asks after each empty look (`Worker._idle_wait_s`).
_NEXT_DUE = sa.select(
    sa.select(sa.func.min(runs.c.not_before))
    .where(runs.c.status == RunStatus.QUEUED.value, runs.c.not_before > _NOW)
    .scalar_subquery(),
    sa.select(sa.func.min(runs.c.lease_expires_at))
    .where(runs.c.status == RunStatus.RUNNING.value, runs.c.lease_expires_at > _NOW)
    .scalar_subquery(),
)


async def next_due(conn: AsyncConnection, *, now: datetime) -> datetime | None:
    """When, after `now`, a queued run becomes due or a running run's lease expires, whichever
    comes first (None: neither)."""
    row = (await conn.execute(_NEXT_DUE, {"b_now": now})).one()
    times = [t for t in row if t is not None]
    return min(times) if times else None


async def claim_runs(
    conn: AsyncConnection,
    *,
    owner: str,
    ttl_s: float,
    now: datetime,
    limit: int = 1,
    savepoint: bool = True,
) -> list[Claim]:
    """Take up to `limit` runnable runs with fresh leases, in one transaction; an empty list if
    none is free (see `_update` for `savepoint`). A named run: `claim_run`."""
    query = _CANDIDATES_LOCKED if conn.dialect.name == "postgresql" else _CANDIDATES
    params = {"b_now": now, "b_limit": limit}
    chosen = list((await conn.execute(query, params)).scalars())
    if not chosen:
        return []
    rows = await _update(
        conn,
        sa.update(runs)
        .where(among(conn, runs.c.id, chosen), runs.c.status == RunStatus.QUEUED.value)
        .values(**_claimed(owner, now + timedelta(seconds=ttl_s), now))
        .returning(*runs.c),
        savepoint=savepoint,
    )
    records = [to_record(row) for row in rows]
    return [Claim(run=r, owner=owner, token=r.lease_token, last_seq=r.event_seq) for r in records]


async def claim_run(
    conn: AsyncConnection,
    *,
    owner: str,
    ttl_s: float,
    now: datetime,
    run_id: str | None = None,
    savepoint: bool = True,
) -> Claim | None:
    """Take the next runnable run (or exactly `run_id`); None if none is free (see `_update`
    for `savepoint`)."""
    if run_id is None:
        claims = await claim_runs(conn, owner=owner, ttl_s=ttl_s, now=now, savepoint=savepoint)
        return claims[0] if claims else None
    params = {
        "b_id": run_id,
        "b_now": now,
        "b_owner": owner,
        "b_expires": now + timedelta(seconds=ttl_s),
    }
    rows = await _update(conn, _CLAIM_ONE, params, savepoint=savepoint)
    if not rows:
        return None
    record = to_record(rows[0])
    return Claim(run=record, owner=owner, token=record.lease_token, last_seq=record.event_seq)


async def _update(
    conn: AsyncConnection,
    statement: sa.UpdateBase,
    params: dict[str, Any] | None = None,
    *,
    savepoint: bool,
) -> list[sa.Row[Any]]:
    """The claiming UPDATE's rows; none if it lost a race to the unique index.

    With `savepoint`, the race is caught in a savepoint and the transaction stays usable.
    Without (two statements fewer), IntegrityError reaches the caller, who rolls the whole
    transaction back: for a transaction that only claims, that loses nothing.
    """
    if not savepoint:
        return list((await conn.execute(statement, params)).all())
    try:
        async with conn.begin_nested():
            return list((await conn.execute(statement, params)).all())
    except IntegrityError:
        return []


@dataclass(kw_only=True, frozen=True)
class Reclaimed:
    """Runs taken back from a worker whose lease expired: (id, trigger) of each run requeued
    and of each dead-lettered (it had used all its attempts)."""

    requeued: list[tuple[str, str]] = field(default_factory=list)
    dead: list[tuple[str, str]] = field(default_factory=list)


async def reclaim_expired(conn: AsyncConnection, *, now: datetime) -> list[str]:
    """Put runs whose worker stopped renewing back in the queue (they resume from their
    checkpoint); a run that has used all its attempts this way is dead-lettered instead.
    The ids of the runs requeued."""
    return [run_id for run_id, _trigger in (await reclaim_expired_runs(conn, now=now)).requeued]


# Requeueing the runs whose lease expired: every worker's maintenance, on every poll (built once,
# store/db.py). Out of attempts, a run is dead: no retry comes (a person may requeue it).
_EXPIRED = sa.and_(runs.c.status == RunStatus.RUNNING.value, runs.c.lease_expires_at < _NOW)
_LEASE_LOST = ErrorInfo(
    cls="LeaseExpired",
    message="the worker running this run stopped (its lease expired) on every attempt",
    retryable=False,
)
_DEAD_ON_EXPIRY = (
    sa.update(runs)
    .where(_EXPIRED, runs.c.attempt >= runs.c.max_attempts)
    .values(
        status=RunStatus.DEAD.value,
        lease_owner=None,
        lease_expires_at=None,
        error=_LEASE_LOST.model_dump(),
        finished_at=_NOW,
        updated_at=_NOW,
    )
    .returning(runs.c.id, runs.c.trigger)
)
_REQUEUED_ON_EXPIRY = (
    sa.update(runs)
    .where(_EXPIRED)
    .values(
        status=RunStatus.QUEUED.value,
        lease_owner=None,
        lease_expires_at=None,
        attempt=runs.c.attempt + 1,
        not_before=_NOW,
        updated_at=_NOW,
    )
    .returning(runs.c.id, runs.c.trigger)
)


async def reclaim_expired_runs(conn: AsyncConnection, *, now: datetime) -> Reclaimed:
    """`reclaim_expired`, telling which runs were requeued and which dead-lettered."""
    dead = (await conn.execute(_DEAD_ON_EXPIRY, {"b_now": now})).all()
    requeued = (await conn.execute(_REQUEUED_ON_EXPIRY, {"b_now": now})).all()
    return Reclaimed(
        requeued=[(row.id, row.trigger) for row in requeued],
        dead=[(row.id, row.trigger) for row in dead],
    )

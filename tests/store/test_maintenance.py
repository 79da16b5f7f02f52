"""What every worker runs on every poll, idle or not: looking for runs to claim and requeueing
the runs whose lease expired. Their statements are built once (store/db.py) with the time and
the limit bound on each call: each call must see its own `now` and `limit`, on both databases."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from pressloop.contracts import RunStatus
from pressloop.store import claims as claim_store
from pressloop.store.db import Database
from pressloop.store.schema import runs
from tests.support.queued_runs import queue_runs

NOW = datetime(2026, 12, 5, 12, tzinfo=UTC)
TTL_S = 30.0


async def _queue(database: Database, count: int, *, max_attempts: int = 5) -> list[str]:
    """`count` queued runs, each on a thread of its own, due now."""
    async with database.write() as conn:
        queued = await queue_runs(conn, count, now=NOW, max_attempts=max_attempts)
    return [run.id for run in queued]


async def _claim(database: Database, *, now: datetime, limit: int) -> list[str]:
    async with database.write() as conn:
        claims = await claim_store.claim_runs(conn, owner="w1", ttl_s=TTL_S, now=now, limit=limit)
    return [claim.run.id for claim in claims]


async def _status(database: Database, run_id: str) -> tuple[str, int, dict | None]:
    async with database.read() as conn:
        row = (
            await conn.execute(
                sa.select(runs.c.status, runs.c.attempt, runs.c.error).where(runs.c.id == run_id)
            )
        ).one()
    return row.status, row.attempt, row.error


async def test_each_claim_takes_at_most_its_limit_of_the_runs_due_at_its_time(
    database: Database,
) -> None:
    queued = await _queue(database, 3)
    # Before they are due: none (the bound time is this call's, not the first call's).
    assert await _claim(database, now=NOW - timedelta(seconds=1), limit=10) == []
    first = await _claim(database, now=NOW, limit=2)
    assert len(first) == 2 and set(first) <= set(queued)
    rest = await _claim(database, now=NOW, limit=2)
    assert rest == sorted(set(queued) - set(first))
    assert await _claim(database, now=NOW, limit=2) == []


async def test_an_expired_lease_requeues_its_run_and_the_last_attempt_dies(
    database: Database,
) -> None:
    (retried,) = await _queue(database, 1, max_attempts=5)
    (last,) = await _queue(database, 1, max_attempts=1)
    assert sorted(await _claim(database, now=NOW, limit=10)) == sorted([retried, last])
    expires = NOW + timedelta(seconds=TTL_S)

    async with database.write() as conn:
        # Not expired yet at this call's time: nothing moves.
        early = await claim_store.reclaim_expired_runs(conn, now=expires - timedelta(seconds=1))
    assert early.requeued == [] and early.dead == []
    async with database.write() as conn:
        late = await claim_store.reclaim_expired_runs(conn, now=expires + timedelta(seconds=1))
    assert [run_id for run_id, _ in late.requeued] == [retried]
    assert [run_id for run_id, _ in late.dead] == [last]

    status, attempt, error = await _status(database, retried)
    assert (status, attempt, error) == (RunStatus.QUEUED.value, 2, None)
    status, attempt, error = await _status(database, last)
    assert status == RunStatus.DEAD.value and attempt == 1
    assert error is not None and error["cls"] == "LeaseExpired" and error["retryable"] is False
    # The requeued run is due at once, and claimable again.
    assert await _claim(database, now=expires + timedelta(seconds=1), limit=10) == [retried]

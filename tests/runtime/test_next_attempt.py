"""A run's next attempt beside the end of the last one, in one process, on both databases.

A retry is claimed (here or by a worker) as soon as the last attempt's finish commits, while that
attempt's runner is still ending: its session may still be closing, or have a lease renewal
marked. The next attempt must keep everything: its writes are committed (the last one's stale
writes fail alone, with its lost lease) and a person's cancel still reaches it. (CI found a retry
hanging for ever: the first attempt's session, closing after the retry had started, dropped the
retry's finish from the group commit.)
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import sqlalchemy as sa

from pressloop.config import Settings
from pressloop.contracts import EventType, RunStatus
from pressloop.errors import LeaseLost
from pressloop.providers.scripted import ScriptedProvider
from pressloop.runtime.service import Service
from pressloop.runtime.session import RunSession
from pressloop.store.records import Claim
from pressloop.store.schema import runs
from tests.conftest import FakeClock
from tests.runtime.conftest import ServiceFactory
from tests.runtime.sessions import claimed, session_of

# Long enough for any commit on a busy machine; a dropped write never ends.
COMMIT_WAIT_S = 10.0


async def next_attempt(service: Service, claim: Claim) -> Claim:
    """The run goes back to the queue, as a retry does, and is claimed again (a new token)."""
    async with service.database.write() as conn:
        await conn.execute(
            sa.update(runs)
            .where(runs.c.id == claim.run.id)
            .values(status=RunStatus.QUEUED.value, attempt=runs.c.attempt + 1)
        )
    again = await service.runner.claimer.claim(claim.run.id)
    assert again is not None and again.token == claim.token + 1
    return again


async def texts(service: Service, run_id: str) -> list[str]:
    return [e.data["text"] for e in await service.events(run_id) if e.type is EventType.MESSAGE]


async def two_attempts(
    make_service: ServiceFactory, first_writes: str | None = None
) -> tuple[Service, str, RunSession, RunSession]:
    """A run's first attempt's session (with `first_writes` committed) and its retry's."""
    service = await make_service([])
    [first] = await claimed(service, 1)
    last = session_of(service, first)
    if first_writes is not None:
        await last.emit(EventType.MESSAGE, {"text": first_writes})
        await last.renew()
    retry = session_of(service, await next_attempt(service, first))
    return service, first.run.id, last, retry


async def test_the_last_attempt_closing_late_keeps_the_next_attempts_writes(
    make_service: ServiceFactory,
) -> None:
    service, run_id, last, retry = await two_attempts(make_service, "first attempt")

    await retry.emit(EventType.MESSAGE, {"text": "second attempt"})
    renewal = asyncio.ensure_future(retry.renew())
    await asyncio.sleep(0)  # the retry's writes are marked; the committer has not started
    await last.close()  # the first attempt's runner closes its session only now

    await asyncio.wait_for(renewal, COMMIT_WAIT_S)
    assert await texts(service, run_id) == ["first attempt", "second attempt"]
    assert retry.failure is None


async def test_a_stale_renewal_marked_first_neither_hides_nor_joins_the_next_attempt(
    make_service: ServiceFactory,
) -> None:
    service, run_id, last, retry = await two_attempts(make_service)

    # The last attempt still has writes marked (its lease is gone) when the retry writes.
    await last.emit(EventType.MESSAGE, {"text": "stale"})
    last.renew_soon()
    await retry.emit(EventType.MESSAGE, {"text": "fresh"})
    await asyncio.wait_for(retry.renew(), COMMIT_WAIT_S)

    assert await texts(service, run_id) == ["fresh"]
    assert isinstance(last.failure, LeaseLost)
    assert retry.failure is None


async def test_a_cancel_reaches_the_next_attempt_after_the_last_one_ends(
    database_url: str, tmp_path: Path, clock: FakeClock, database: object
) -> None:
    # Each model answer waits for its own signal: the first attempt's, then the retry's.
    asked = {1.0: asyncio.Event(), 2.0: asyncio.Event()}
    answer = {1.0: asyncio.Event(), 2.0: asyncio.Event()}

    async def sleep(seconds: float) -> None:
        asked[seconds].set()
        await answer[seconds].wait()

    provider = ScriptedProvider(
        [{"delay_s": 1, "text": "late"}, {"delay_s": 2, "text": "never sent"}], sleep=sleep
    )
    settings = Settings(data_dir=tmp_path, database_url=database_url, provider="scripted")
    service = await Service.open(settings, provider=lambda: provider, now=clock)
    try:
        [first] = await claimed(service, 1)
        last = asyncio.create_task(service.runner.run_claim(first))
        await asyncio.wait_for(asked[1.0].wait(), COMMIT_WAIT_S)
        second = await next_attempt(service, first)
        retry = asyncio.create_task(service.runner.run_claim(second))
        await asyncio.wait_for(asked[2.0].wait(), COMMIT_WAIT_S)

        answer[1.0].set()  # the first attempt answers now, and ends: its lease is gone
        assert await asyncio.wait_for(last, COMMIT_WAIT_S) is None
        running = service.runner.sessions.get(first.run.id)
        assert running is not None and running.claim.token == second.token

        service.runner.signal_cancel(first.run.id)  # what POST /v1/runs/{id}/cancel does here
        finished = await asyncio.wait_for(retry, COMMIT_WAIT_S)
        assert finished is not None and finished.status is RunStatus.CANCELLED
        assert "never sent" not in await texts(service, first.run.id)
    finally:
        answer[2.0].set()
        await service.close()

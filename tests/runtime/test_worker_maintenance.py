"""The worker's maintenance (requeueing expired leases, expiring approvals) runs on every tick
something asked for, but a burst of its own runs ending only claims: hundreds of runs ending
one after the other would otherwise each cost one more write transaction."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import aclosing, asynccontextmanager, contextmanager
from typing import Any

from sqlalchemy import event

from pressloop.contracts import EventType, RunStatus
from pressloop.runtime.service import Service
from pressloop.runtime.worker import Worker
from tests.runtime.conftest import ServiceFactory

POLL_S = 60.0  # never reached in these tests: every tick is a wake-up


class Ticks:
    """The runner's monotonic clock, moved by the test."""

    def __init__(self) -> None:
        self.value = 1_000.0

    def __call__(self) -> float:
        return self.value


@contextmanager
def maintenance_count(service: Service) -> Iterator[list[int]]:
    """How many maintenance passes ran: each expires the approvals that are due, with the one
    statement that compares their expiry with now."""
    seen = [0]

    def count(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if statement.lstrip().startswith("UPDATE approvals") and "expires_at <=" in statement:
            seen[0] += 1

    engine = service.database.engine.sync_engine
    event.listen(engine, "before_cursor_execute", count)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", count)


@asynccontextmanager
async def worker_running(service: Service, worker: Worker) -> AsyncIterator[list[int]]:
    """`worker` running, and its maintenance passes counted, until the block ends."""
    with maintenance_count(service) as passes:
        running = asyncio.create_task(worker.run_forever())
        try:
            yield passes
        finally:
            await worker.stop()
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)


async def _queued(service: Service, count: int) -> list[str]:
    run_ids = []
    for _ in range(count):
        thread = await service.create_thread()
        run_ids.append((await service.submit(thread.id, "hello")).run.id)
    return run_ids


async def _succeeded(service: Service, run_ids: list[str]) -> None:
    for run_id in run_ids:
        assert (await service.wait(run_id, timeout_s=10)).status is RunStatus.SUCCEEDED


async def test_runs_ending_together_claim_the_next_without_repeating_the_maintenance(
    make_service: ServiceFactory,
) -> None:
    service: Service = await make_service([{"text": "done"}] * 6)
    service.runner.monotonic = Ticks()
    run_ids = await _queued(service, 6)
    # Two at a time: the other four are claimed only when a slot frees (the poll never comes).
    worker = Worker(service.runner, concurrency=2, poll_s=POLL_S)
    async with worker_running(service, worker) as passes:
        await _succeeded(service, run_ids)
        await asyncio.sleep(0.1)  # the ticks the last ends woke
        assert passes[0] == 1  # the first tick's; six ends repeated none

        worker.wake()  # asked for (a run queued here): everything is looked at
        await asyncio.sleep(0.1)
        assert passes[0] == 2


async def test_a_run_ending_after_a_poll_interval_runs_the_maintenance(
    make_service: ServiceFactory,
) -> None:
    service: Service = await make_service([{"text": "slow", "delay_s": 0.5}])
    ticks = Ticks()
    service.runner.monotonic = ticks
    (run_id,) = await _queued(service, 1)
    worker = Worker(service.runner, concurrency=2, poll_s=POLL_S)
    async with worker_running(service, worker) as passes:
        async with asyncio.timeout(10), aclosing(service.follow(run_id)) as events:
            async for event in events:
                if event.type is EventType.RUN_STARTED:
                    break  # claimed: the model takes half a second to answer
        assert passes[0] == 1
        ticks.value += POLL_S  # a poll interval passes while the model answers
        await _succeeded(service, [run_id])
        await asyncio.sleep(0.1)
        assert passes[0] == 2  # the end's tick found the maintenance due

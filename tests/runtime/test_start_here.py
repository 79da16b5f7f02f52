"""`submit(start_here=True)` (the API's chat turns, the CLI) on both databases: the new run is
claimed in the transaction that creates it, and a busy thread falls back to the queue."""

from __future__ import annotations

import asyncio

from pressloop.contracts import RunStatus
from pressloop.runtime.service import Service
from tests.runtime.conftest import ServiceFactory


async def test_the_run_is_claimed_in_the_transaction_that_creates_it(
    make_service: ServiceFactory,
) -> None:
    service: Service = await make_service([{"text": "hello"}])
    thread = await service.create_thread()
    submission = await service.submit(thread.id, "hi", start_here=True)
    # submit has returned: its task has not run a step yet, but the run is ours already.
    stored = await service.get_run(submission.run.id)
    assert stored.status is RunStatus.RUNNING
    assert stored.lease_owner == service.runner.owner and stored.attempt == 1
    assert submission.started is not None
    finished = await submission.started
    assert finished is not None and finished.status is RunStatus.SUCCEEDED
    assert finished.result is not None and finished.result.assistant_text == "hello"


async def test_a_busy_thread_queues_the_run_and_it_runs_next(make_service: ServiceFactory) -> None:
    service: Service = await make_service([{"text": "first", "delay_s": 0.3}, {"text": "second"}])
    thread = await service.create_thread()
    first = await service.submit(thread.id, "one", start_here=True)
    second = await service.submit(thread.id, "two", start_here=True)
    assert (await service.get_run(second.run.id)).status is RunStatus.QUEUED
    assert first.started is not None and second.started is not None
    # The second could not be claimed while the first ran: it stays queued for a worker.
    assert await asyncio.wait_for(second.started, 10) is None
    done = await asyncio.wait_for(first.started, 10)
    assert done is not None and done.status is RunStatus.SUCCEEDED
    assert (await service.get_run(second.run.id)).status is RunStatus.QUEUED
    after = await service.run_now(second.run.id)
    assert after is not None and after.status is RunStatus.SUCCEEDED
    assert after.result is not None and after.result.assistant_text == "second"

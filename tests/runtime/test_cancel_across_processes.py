"""A cancel asked in one process stops a run a `pressloop worker` process runs, within a second,
on SQLite and PostgreSQL: the worker notices the flag (`runtime/cancel_watch.py`), cancels the
model call or the write in flight, reconciles the write and ends the run `cancelled`."""

from __future__ import annotations

import asyncio
from typing import Any

from pressloop.contracts import EventType, RunStatus, StepStatus
from pressloop.runtime.service import Service
from pressloop.store import ledger as ledger_store
from tests.support.processes import CrashPackWorkers, wait_for


async def cancel_and_time(service: Service, run_id: str) -> float:
    """Ask to cancel (as the API does) and return the seconds until the run is `cancelled`."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    answer = asyncio.create_task(service.cancel(run_id))
    while (await service.get_run(run_id)).status is not RunStatus.CANCELLED:
        assert loop.time() - started < 10, "the run was not cancelled"
        await asyncio.sleep(0.01)
    took = loop.time() - started
    assert (await answer).status in (RunStatus.CANCELLED, RunStatus.RUNNING)
    return took


async def test_a_cancel_from_another_process_stops_a_slow_model_call(
    service_and_workers: tuple[Service, CrashPackWorkers],
) -> None:
    service, workers = service_and_workers
    thread = await service.create_thread()
    run = (await service.submit(thread.id, "hello")).run
    workers.start([{"text": "never finished", "delay_s": 60}], name="a")

    async def started() -> bool:
        return any(e.type is EventType.RUN_STARTED for e in await service.events(run.id))

    await wait_for(started)
    took = await cancel_and_time(service, run.id)
    print(f"cross-process cancel during a model call: {took:.3f} s")
    assert took < 5, took
    events = await service.events(run.id)
    assert events[-1].type is EventType.RUN_FINISHED and events[-1].data["status"] == "cancelled"


async def test_a_cancel_from_another_process_reconciles_the_write_in_flight(
    service_and_workers: tuple[Service, CrashPackWorkers],
) -> None:
    service, workers = service_and_workers
    thread = await service.create_thread()
    run = (await service.submit(thread.id, "touch once")).run
    workers.hang.touch()  # `touch` makes its effect, then waits while this file exists
    workers.start([{"tool_calls": [{"name": "touch", "arguments": {"text": "a"}}]}], name="a")

    async def touched() -> bool:
        return len(workers.effect_lines()) == 1

    await wait_for(touched)
    took = await cancel_and_time(service, run.id)
    print(f"cross-process cancel during a write: {took:.3f} s")
    assert took < 5, took
    done: Any = await service.get_run(run.id)
    assert done.result.steps[0].status is StepStatus.SUCCEEDED  # found on "the site"
    assert done.result.steps[0].result_summary == "found"
    assert workers.effect_lines() == [f"{run.id}:0:a"]  # not sent again
    async with service.database.read() as conn:
        (entry,) = await ledger_store.list_entries(conn, run.id)
    assert entry.status == "done"

"""The kill switch on both databases: a new message is refused before anything is stored, and
runs already queued wait (they are not failed) until it is off."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from pressloop.contracts import RunStatus
from pressloop.errors import AgentDisabled
from pressloop.runtime.service import Service
from pressloop.runtime.worker import Worker
from pressloop.store import settings_repo
from pressloop.store.schema import messages, runs
from tests.conftest import FakeClock
from tests.runtime.conftest import ServiceFactory


async def switch(service: Service, on: bool, clock: FakeClock) -> None:
    async with service.database.write() as conn:
        await settings_repo.set_setting(conn, "agent_disabled", on, now=clock())


async def count(service: Service, table: sa.Table) -> int:
    async with service.database.read() as conn:
        found = await conn.execute(sa.select(sa.func.count()).select_from(table))
        return int(found.scalar_one())


async def test_the_setting_refuses_a_new_message_before_anything_is_stored(
    make_service: ServiceFactory, clock: FakeClock
) -> None:
    service: Service = await make_service([{"text": "never"}])
    thread = await service.create_thread()
    await switch(service, True, clock)
    with pytest.raises(AgentDisabled, match="agent_disabled setting"):
        await service.submit(thread.id, "hi", start_here=True)
    with pytest.raises(AgentDisabled):
        await service.check_enabled()
    assert await count(service, runs) == 0 and await count(service, messages) == 0
    assert service.scripted.remaining == 1  # type: ignore[attr-defined]


async def test_the_environment_refuses_whatever_the_setting_says(
    make_service: ServiceFactory, clock: FakeClock
) -> None:
    service: Service = await make_service([{"text": "never"}], disable_agent=True)
    await switch(service, False, clock)
    thread = await service.create_thread()
    with pytest.raises(AgentDisabled, match="PRESSLOOP_DISABLE_AGENT"):
        await service.submit(thread.id, "hi")
    with pytest.raises(AgentDisabled):
        await service.spawn(thread.id, "a child")
    assert await count(service, runs) == 0


async def test_queued_runs_wait_while_it_is_on_and_run_once_it_is_off(
    make_service: ServiceFactory, clock: FakeClock
) -> None:
    service: Service = await make_service([{"text": "after the pause"}])
    thread = await service.create_thread()
    run = (await service.submit(thread.id, "queued before the switch")).run
    await switch(service, True, clock)
    worker = Worker(service.runner, concurrency=2, poll_s=0.05)

    assert await worker.tick() == 0  # nothing is claimed...
    assert await service.run_now(run.id) is None
    waiting = await service.get_run(run.id)
    assert waiting.status is RunStatus.QUEUED and waiting.error is None  # ...and nothing failed

    await switch(service, False, clock)
    assert await worker.tick() == 1
    done = await service.wait(run.id, timeout_s=10)
    assert done.status is RunStatus.SUCCEEDED
    assert done.result is not None and done.result.assistant_text == "after the pause"
    await worker.stop()

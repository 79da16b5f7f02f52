"""PostgreSQL NOTIFY wakes a stream served by another process: a run committed by one Service is
followed by a second Service (its own bus, as another process has) that polls only every 30 s,
so only the notification can bring the events to it in time."""

from __future__ import annotations

import asyncio
from pathlib import Path

from pressloop.config import Settings
from pressloop.contracts import Event, EventType
from pressloop.providers.scripted import ScriptedProvider
from pressloop.runtime.service import Service


async def _service(url: str, folder: Path, *, upgrade: bool = False) -> Service:
    settings = Settings(database_url=url, data_dir=folder, provider="scripted", event_poll_s=30.0)
    provider = ScriptedProvider([{"text": "hello from another process", "delay_s": 0.3}])
    return await Service.open(settings, provider=lambda: provider, upgrade=upgrade)


async def test_a_stream_of_a_run_another_process_runs_wakes_on_notify(
    postgres_database: str, tmp_path: Path
) -> None:
    runs_it = await _service(postgres_database, tmp_path / "a")
    serves_it = await _service(postgres_database, tmp_path / "b")
    try:
        listener = serves_it.start_listener()
        assert listener is not None
        await asyncio.wait_for(listener.listening.wait(), 10)
        thread = await runs_it.create_thread()
        run = (await runs_it.submit(thread.id, "hi")).run
        received: list[Event] = []

        async def follow() -> None:
            async for event in serves_it.follow(run.id):
                received.append(event)

        follower = asyncio.create_task(follow())
        await asyncio.sleep(0.3)  # it has read the (empty) history and waits for news
        finished = await runs_it.run_now(run.id)
        assert finished is not None and finished.status.value == "succeeded"
        await asyncio.wait_for(follower, 5)  # its next poll would be 30 s away
        assert [e.seq for e in received] == list(range(1, len(received) + 1))
        assert received[-1].type is EventType.RUN_FINISHED
        assert any(e.type is EventType.MESSAGE for e in received)
    finally:
        await serves_it.close()
        await runs_it.close()


async def test_without_postgresql_there_is_nothing_to_listen_to(tmp_path: Path) -> None:
    service = await _service(f"sqlite+aiosqlite:///{tmp_path}/db.sqlite", tmp_path, upgrade=True)
    try:
        assert service.start_listener() is None
    finally:
        await service.close()

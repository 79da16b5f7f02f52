"""A whole service (database, runner, registry) over SQLite or PostgreSQL, scripted model."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pressloop.config import Settings
from pressloop.providers.scripted import ScriptedProvider
from pressloop.runtime.service import Service
from tests.conftest import FakeClock
from tests.runtime.stream_readers import HeldCommits
from tests.support.processes import CrashPackWorkers

ServiceFactory = Callable[..., Any]


@pytest.fixture
async def make_service(
    database_url: str, tmp_path: Path, clock: FakeClock, database: object
) -> AsyncIterator[ServiceFactory]:
    """Build a Service on the test database with a scripted provider; closed at teardown.

    Depends on `database` so the schema exists (SQLite) or tables are emptied (PostgreSQL).
    """
    services: list[Service] = []

    async def build(script: list[dict[str, Any]], **overrides: Any) -> Service:
        provider = ScriptedProvider(script)
        settings = Settings(
            data_dir=tmp_path, database_url=database_url, provider="scripted", **overrides
        )
        service = await Service.open(settings, provider=lambda: provider, now=clock)
        service.scripted = provider  # type: ignore[attr-defined]
        services.append(service)
        return service

    yield build
    for service in services:
        await service.close()


@pytest.fixture
async def service_and_workers(
    database_url: str, tmp_path: Path, database: object
) -> AsyncIterator[tuple[Service, CrashPackWorkers]]:
    """A service on the test database (to submit runs and read them) and `pressloop worker`
    processes with the crash pack (started by the test, killed at teardown)."""
    settings = Settings(data_dir=tmp_path, database_url=database_url, provider="scripted")
    service = await Service.open(settings, provider=lambda: ScriptedProvider([]))
    workers = CrashPackWorkers(database_url, tmp_path)
    try:
        yield service, workers
    finally:
        workers.stop_all()
        await service.close()


HoldFactory = Callable[[Service], HeldCommits]


@pytest.fixture
def hold(make_service: ServiceFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[HoldFactory]:
    """Hold a service's commits; released at teardown, before the services close (a failed
    test would otherwise leave `close()` waiting for a batch that never runs)."""
    made: list[HeldCommits] = []

    def build(service: Service) -> HeldCommits:
        made.append(HeldCommits(service, monkeypatch))
        return made[-1]

    yield build
    for held in made:
        held.release()

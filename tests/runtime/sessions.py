"""Helpers for tests that drive run sessions by hand: claimed runs, their sessions, and counters
of what reached the database (SQLAlchemy's own engine events; nothing of ours is replaced)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import event

from pressloop.runtime.service import Service
from pressloop.runtime.session import RunSession
from pressloop.store.records import Claim


async def claimed(service: Service, count: int) -> list[Claim]:
    """`count` runs, each on a new thread, claimed by the service's runner."""
    claims = []
    for i in range(count):
        thread = await service.create_thread(title=f"t{i}")
        run = (await service.submit(thread.id, f"hello {i}")).run
        claim = await service.runner.claimer.claim(run.id)
        assert claim is not None
        claims.append(claim)
    return claims


def session_of(service: Service, claim: Claim) -> RunSession:
    return RunSession(
        database=service.database,
        claim=claim,
        committer=service.runner.committer,
        now=service.now,
        last_seq=claim.last_seq,
    )


class EngineEvents:
    """Counts an engine event ("commit", "begin", "before_cursor_execute"...), optionally only
    those whose arguments `accept` takes."""

    def __init__(
        self, service: Service, name: str, accept: Callable[..., bool] | None = None
    ) -> None:
        # The service's engine, and the group commit's when it has one (PostgreSQL).
        self.engines = [service.database.engine.sync_engine]
        batch_database = service.runner.committer.batch_database
        if batch_database is not service.database:
            self.engines.append(batch_database.engine.sync_engine)
        self.name = name
        self.accept = accept
        self.count = 0

    def __enter__(self) -> EngineEvents:
        for engine in self.engines:
            event.listen(engine, self.name, self._seen)
        return self

    def __exit__(self, *_exc: object) -> None:
        for engine in self.engines:
            event.remove(engine, self.name, self._seen)

    def _seen(self, *args: Any) -> None:
        if self.accept is None or self.accept(*args):
            self.count += 1

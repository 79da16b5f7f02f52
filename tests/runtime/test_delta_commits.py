"""Text deltas a stream of this process has already sent wait up to `PRESSLOOP_DELTA_COMMIT` for
their commit, together (one merged event per run); anything else goes at once and takes the
waiting deltas with it; a delta nobody streams here (a reader elsewhere has only the database)
is never held; closing writes what waits. Both databases."""

from __future__ import annotations

import asyncio

from pressloop.contracts import Event, EventType
from pressloop.runtime.service import Service
from pressloop.runtime.session import RunSession
from tests.runtime.conftest import ServiceFactory
from tests.runtime.sessions import claimed, session_of

PIECES = ["Hel", "lo", " world"]


async def _streamed_session(service: Service) -> RunSession:
    """A claimed run with a stream of this process subscribed to its parts."""
    session = session_of(service, (await claimed(service, 1))[0])
    service.bus.subscribe(session.run_id, parts=True)
    return session


async def _deltas_streamed_here(
    make_service: ServiceFactory, delay_s: float
) -> tuple[Service, RunSession]:
    """A service with `delta_commit_s=delay_s` and a claimed run of it, a stream of this
    process subscribed to the run's parts, and PIECES emitted as text deltas."""
    service: Service = await make_service([], delta_commit_s=delay_s)
    session = await _streamed_session(service)
    for piece in PIECES:
        await session.emit(EventType.MESSAGE, {"delta": piece})
    return service, session


async def _stored_within(
    service: Service, run_id: str, count: int, timeout_s: float
) -> list[Event]:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        stored = await service.events(run_id)
        if len(stored) >= count or asyncio.get_running_loop().time() > deadline:
            return stored
        await asyncio.sleep(0.02)


async def test_streamed_deltas_wait_then_go_together_as_one_event(
    make_service: ServiceFactory,
) -> None:
    service: Service = await make_service([], delta_commit_s=0.5)
    session = await _streamed_session(service)
    started = asyncio.get_running_loop().time()
    for piece in PIECES:
        await session.emit(EventType.MESSAGE, {"delta": piece})
    await asyncio.sleep(0.2)
    assert await service.events(session.run_id) == []  # still waiting
    stored = await _stored_within(service, session.run_id, 1, timeout_s=5)
    assert asyncio.get_running_loop().time() - started >= 0.5
    assert [(e.seq, e.data) for e in stored] == [(1, {"delta": "Hello world", "parts": [3, 2, 6]})]


async def test_an_event_after_streamed_deltas_goes_at_once_and_takes_them(
    make_service: ServiceFactory,
) -> None:
    service, session = await _deltas_streamed_here(make_service, 4)
    await session.emit(EventType.ACTION, {"action": "noop", "params": {}})
    await asyncio.wait_for(session.renew(), 2)  # not 4 s
    stored = await service.events(session.run_id)
    assert [(e.seq, e.type) for e in stored] == [(1, EventType.MESSAGE), (2, EventType.ACTION)]
    assert stored[0].data["delta"] == "Hello world"


async def test_a_delta_nobody_streams_here_is_written_at_once(
    make_service: ServiceFactory,
) -> None:
    service: Service = await make_service([], delta_commit_s=4)
    session = session_of(service, (await claimed(service, 1))[0])  # no stream here
    await session.emit(EventType.MESSAGE, {"delta": "for a reader elsewhere"})
    stored = await _stored_within(service, session.run_id, 1, timeout_s=2)
    assert [e.data for e in stored] == [{"delta": "for a reader elsewhere"}]


async def test_closing_the_committer_writes_the_waiting_deltas(
    make_service: ServiceFactory,
) -> None:
    service, session = await _deltas_streamed_here(make_service, 4)
    await asyncio.wait_for(service.runner.committer.close(), 2)
    stored = await service.events(session.run_id)
    assert [e.data["delta"] for e in stored] == ["Hello world"]


async def test_with_zero_every_delta_is_written_at_once(make_service: ServiceFactory) -> None:
    service: Service = await make_service([], delta_commit_s=0)
    session = await _streamed_session(service)
    await session.emit(EventType.MESSAGE, {"delta": "now"})
    stored = await _stored_within(service, session.run_id, 1, timeout_s=5)
    assert [e.data for e in stored] == [{"delta": "now"}]

"""A run whose next text a person waits for has what it queued before written first: its batch
goes ahead of the other runs' writes, does not gather, and does not wait behind paced steps.
A run nobody streams is never hurried. Both databases."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from pressloop.contracts import EventType
from pressloop.providers.base import ModelRequest, ModelResponse, ResponseDone, StreamPart
from pressloop.runtime.commits import Committer
from pressloop.runtime.outbox import Outbox
from pressloop.runtime.service import Service
from pressloop.runtime.session import RunSession
from pressloop.runtime.stream_urgency import UrgentStreams
from tests.runtime.conftest import ServiceFactory
from tests.runtime.sessions import claimed, session_of

ACTION = {"action": "noop", "params": {}}


async def _commit_order(sessions: dict[str, RunSession]) -> list[str]:
    """The names of `sessions` in the order their queued writes are committed."""
    order: list[str] = []

    async def renewed(name: str, session: RunSession) -> None:
        await session.renew()
        order.append(name)

    await asyncio.wait_for(
        asyncio.gather(*(renewed(name, s) for name, s in sessions.items())), timeout=10
    )
    return order


async def _three_with_events(service: Service) -> dict[str, RunSession]:
    """Three claimed runs, each with an event queued, a before b before c."""
    sessions = {
        name: session_of(service, claim)
        for name, claim in zip("abc", await claimed(service, 3), strict=True)
    }
    for session in sessions.values():
        await session.emit(EventType.ACTION, ACTION)
    return sessions


@pytest.mark.parametrize(
    ("streamed", "hurried", "expected"),
    [
        (True, True, ["c", "a", "b"]),
        (True, False, ["a", "b", "c"]),
        (False, True, ["a", "b", "c"]),  # nobody waits for c's text: no hurry
    ],
)
async def test_a_streamed_run_about_to_call_the_model_is_committed_first(
    make_service: ServiceFactory, streamed: bool, hurried: bool, expected: list[str]
) -> None:
    service: Service = await make_service([], commit_batch=1)
    sessions = await _three_with_events(service)
    if streamed:
        service.bus.subscribe(sessions["c"].run_id, parts=True)
    if hurried:
        sessions["c"].hurry()
    assert await _commit_order(sessions) == expected
    stored = await service.events(sessions["c"].run_id)
    assert [e.data for e in stored] == [ACTION]


async def test_a_hurried_batch_does_not_gather(make_service: ServiceFactory) -> None:
    """With `gather_s` and more runs in flight than queued, a batch waits for the others'
    writes; a hurried one goes at once."""
    service: Service = await make_service([])
    gathering = asyncio.Event()
    gathered = asyncio.Event()

    async def gather(_s: float) -> None:
        gathering.set()
        await gathered.wait()

    committer = Committer(
        service.database,
        service.bus,
        now=service.now,
        lease_ttl_s=service.settings.lease_ttl_s,
        gather_s=5,
        in_flight=lambda: 10,
        sleep=gather,
    )
    first, second = await claimed(service, 2)
    outboxes = [
        Outbox(run_id=c.run.id, thread_id=c.run.thread_id, token=c.token, last_seq=c.last_seq)
        for c in (first, second)
    ]
    try:
        outboxes[0].add_event(EventType.ACTION, ACTION, service.now())
        waiting = committer.mark(outboxes[0])
        await asyncio.wait_for(gathering.wait(), timeout=5)
        assert not waiting.done()  # the plain batch gathers
        gathered.set()
        assert (await asyncio.wait_for(waiting, timeout=10)).error is None
        gathering.clear()
        gathered.clear()

        outboxes[1].add_event(EventType.ACTION, ACTION, service.now())
        hurried = committer.mark(outboxes[1])
        committer.hurry(outboxes[1])
        assert (await asyncio.wait_for(hurried, timeout=10)).error is None
        assert not gathering.is_set()
        assert [e.data for e in await service.events(second.run.id)] == [ACTION]
    finally:
        gathered.set()
        await committer.close()


async def test_hurrying_with_nothing_queued_writes_nothing(make_service: ServiceFactory) -> None:
    service: Service = await make_service([])
    session = session_of(service, (await claimed(service, 1))[0])
    service.bus.subscribe(session.run_id, parts=True)
    await session.renew()  # nothing left queued
    session.hurry()
    assert not service.runner.committer._hurried  # noqa: SLF001 - what the test is about
    assert await service.events(session.run_id) == []


class _OneAnswer:
    """A model at the system's edge: an empty answer, streamed."""

    name = "one-answer"
    model = "one-answer"
    supports_tools = True

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return ModelResponse()

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        yield ResponseDone(response=ModelResponse())


@pytest.mark.parametrize(("streams_text", "hurries"), [(True, 1), (False, 0)])
async def test_a_call_whose_text_may_be_streamed_hurries_the_commit(
    streams_text: bool, hurries: int
) -> None:
    calls: list[str] = []
    model = UrgentStreams(_OneAnswer(), lambda: calls.append("hurry"))  # type: ignore[arg-type]
    request = ModelRequest(system="", messages=[], streams_text=streams_text)
    parts = [part async for part in model.stream(request)]
    assert isinstance(parts[-1], ResponseDone)
    assert len(calls) == hurries

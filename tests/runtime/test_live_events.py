"""Live events on both databases: text deltas waiting for one commit become one event, and a
stream in the process that commits takes its events from the bus, not from the database."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pressloop.contracts import Event, EventType
from pressloop.runtime.service import Service
from pressloop.runtime.service_reads import EVENT_PAGE
from pressloop.runtime.session import RunSession
from tests.runtime.conftest import ServiceFactory
from tests.runtime.sessions import EngineEvents, claimed, session_of


async def _session(service: Service) -> RunSession:
    return session_of(service, (await claimed(service, 1))[0])


def _reads_events(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> bool:
    return statement.lstrip().upper().startswith("SELECT") and "FROM run_events" in statement


async def test_deltas_waiting_for_the_same_commit_become_one_event(
    make_service: ServiceFactory,
) -> None:
    service: Service = await make_service([])
    session = await _session(service)
    for piece in ["Hel", "lo", " world"]:
        await session.emit(EventType.MESSAGE, {"delta": piece})
    await session.emit(EventType.ACTION, {"action": "noop", "params": {}})
    await session.emit(EventType.MESSAGE, {"delta": "!"})
    await session.emit(EventType.MESSAGE, {"text": "Hello world!", "final": True})
    await session.renew()
    stored = await service.events(session.run_id)
    # The merged event records its parts' lengths: streams got them one by one before the commit.
    assert [(e.seq, e.type, e.data) for e in stored] == [
        (1, EventType.MESSAGE, {"delta": "Hello world", "parts": [3, 2, 6]}),
        (2, EventType.ACTION, {"action": "noop", "params": {}}),
        (3, EventType.MESSAGE, {"delta": "!"}),
        (4, EventType.MESSAGE, {"text": "Hello world!", "final": True}),
    ]
    # Numbering goes on from the merged events.
    assert session.seq == 4
    await session.emit(EventType.MESSAGE, {"delta": "again"})
    await session.renew()
    assert [e.seq for e in await service.events(session.run_id)] == [1, 2, 3, 4, 5]


async def test_a_stream_takes_what_this_process_commits_from_the_bus(
    make_service: ServiceFactory,
) -> None:
    service: Service = await make_service([])
    session = await _session(service)
    received: list[Event] = []

    async def follow() -> None:
        async for item in service.follow(session.run_id):
            received.append(item)

    with EngineEvents(service, "before_cursor_execute", _reads_events) as reads:
        follower = asyncio.create_task(follow())
        await asyncio.sleep(0.05)  # it has caught up (nothing yet) and waits
        reads_before = reads.count
        for n in range(20):
            await session.emit(EventType.MESSAGE, {"delta": f"{n} "})
            await session.renew()  # one commit per delta: nothing to merge
        await session.emit(EventType.RUN_FINISHED, {"status": "succeeded"})
        await session.renew()
        async with asyncio.timeout(5):
            await follower
    assert [e.seq for e in received] == list(range(1, 22))
    assert "".join(e.data.get("delta", "") for e in received) == "".join(f"{n} " for n in range(20))
    assert reads_before >= 1  # the catch-up read
    assert reads.count - reads_before == 0


async def test_a_gap_in_what_the_bus_hands_over_is_read_from_the_database(
    make_service: ServiceFactory,
) -> None:
    service: Service = await make_service([])
    session = await _session(service)
    for n in range(3):
        await session.emit(EventType.MESSAGE, {"delta": f"{n}"})
        await session.renew()
    received: list[Event] = []

    async def follow() -> None:
        async for item in service.follow(session.run_id):
            received.append(item)

    follower = asyncio.create_task(follow())
    await asyncio.sleep(0.05)
    assert [e.seq for e in received] == [1, 2, 3]
    # Events another process committed are not on this bus; a later one shows the gap.
    stored = (await service.events(session.run_id))[-1]
    stray = stored.model_copy(update={"seq": 9, "data": {"delta": "not stored"}})
    service.bus.publish(session.run_id, [stray])
    await asyncio.sleep(0.05)
    assert [e.seq for e in received] == [1, 2, 3]  # read the database: nothing after 3
    await session.emit(EventType.RUN_FINISHED, {"status": "succeeded"})
    await session.renew()
    async with asyncio.timeout(5):
        await follower
    assert [e.seq for e in received] == [1, 2, 3, 4]


async def test_a_reader_catching_up_reads_every_page_without_waiting(
    make_service: ServiceFactory,
) -> None:
    service: Service = await make_service([], event_poll_s=30.0)
    session = await _session(service)
    total = EVENT_PAGE * 2 + 5
    for n in range(total):
        await session.emit(EventType.ACTION, {"n": n})
    await session.emit(EventType.RUN_FINISHED, {"status": "succeeded"})
    await session.renew()
    received: list[Event] = []

    async def follow() -> None:
        async for item in service.follow(session.run_id):
            received.append(item)

    # Three pages are stored; a wait between them would be a 30 s poll.
    await asyncio.wait_for(follow(), 10)
    assert [e.seq for e in received] == list(range(1, total + 2))


class StreamReads:
    """Counts the run and event reads made by one task (the stream's), not the turn's own."""

    def __init__(self) -> None:
        self.task: asyncio.Task[list[Event]] | None = None

    def __call__(self, _conn: Any, _cursor: Any, statement: str, *_args: Any) -> bool:
        head = statement.lstrip().upper()
        reads = head.startswith("SELECT") and ("FROM RUN_EVENTS" in head or "FROM RUNS" in head)
        return reads and asyncio.current_task() is self.task


async def _streamed(service: Service, run_id: str, **kwargs: Any) -> list[Event]:
    async with asyncio.timeout(10):
        return [event async for event in service.follow(run_id, **kwargs)]


async def test_a_stream_subscribed_when_its_run_was_submitted_reads_no_database(
    make_service: ServiceFactory,
) -> None:
    # Under load a read waits for a pooled connection behind the turns' work, and the first
    # token waited with it: the stream of a run this request starts needs none.
    service: Service = await make_service(
        [{"tool_calls": [{"name": "noop", "arguments": {}}]}, {"text": "all done, thanks"}],
        event_poll_s=30.0,  # a fallback poll would read too, and take 30 s
    )
    thread = await service.create_thread()
    stream_reads = StreamReads()
    with EngineEvents(service, "before_cursor_execute", stream_reads) as reads:
        submission = await service.submit(thread.id, "go", start_here=True, follow=True)
        assert submission.subscription is not None and submission.started is not None
        stream_reads.task = asyncio.create_task(
            _streamed(service, submission.run.id, subscription=submission.subscription)
        )
        received = await stream_reads.task
        await submission.started
        assert reads.count == 0
        # The same count sees a stream that begins by reading (the run is stored by now).
        stream_reads.task = asyncio.create_task(_streamed(service, submission.run.id))
        again = await stream_reads.task
        assert reads.count >= 1
    assert received[0].type is EventType.RUN_STARTED
    assert received[-1].type is EventType.RUN_FINISHED
    # The answer's text once: in parts sent before their commit, or in the stored delta.
    text = "".join(e.data["delta"] for e in received if "delta" in e.data)
    assert text == "all done, thanks"
    # Every stored event in order, none twice (a delta sent whole as parts is not resent).
    stored = await service.events(submission.run.id)
    whole = [e.seq for e in received if "after" not in e.data]
    assert whole == sorted(set(whole))
    assert set(whole) <= {e.seq for e in stored}
    assert {e.seq for e in stored if "delta" not in e.data} <= set(whole)
    assert [e.seq for e in again] == [e.seq for e in stored]
    assert not service.bus.subscribed(submission.run.id)


async def test_a_subscription_from_the_start_cannot_resume_elsewhere(
    make_service: ServiceFactory,
) -> None:
    service: Service = await make_service([])
    subscription = service.bus.subscribe("run-x", parts=True)
    with pytest.raises(ValueError, match="from its start"):
        await _streamed(service, "run-x", after=3, subscription=subscription)

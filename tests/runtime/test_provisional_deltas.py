"""Text deltas before their commit, on both databases: a stream in the process that runs the turn
gets each delta at once as a provisional part (seq of the event it will be merged into, `part`
k), while the commit is held; the committed event records the parts, so a reader resuming after
part k (here or in another process: another Service, its own bus) gets only the text after it;
and parts never committed (the lease lost) leave the retry's events to follow whole."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import sqlalchemy as sa

from pressloop.contracts import Event, EventType
from pressloop.runtime.bus import MAX_HELD_EVENTS, Part
from pressloop.runtime.service import Service
from pressloop.store import events as event_store
from pressloop.store.records import Claim
from pressloop.store.schema import runs
from tests.runtime.conftest import HoldFactory, ServiceFactory
from tests.runtime.sessions import session_of
from tests.runtime.stream_readers import (
    WAIT_S,
    Reader,
    finish_turn,
    hold_release,
    non_deltas,
    say,
    started,
    text_of,
)


@pytest.mark.parametrize("from_the_turn", [False, True], ids=["by-the-reader", "by-the-turn"])
async def test_the_first_delta_reaches_a_stream_while_its_commit_is_held(
    make_service: ServiceFactory, hold: HoldFactory, from_the_turn: bool
) -> None:
    """by-the-turn: the stream's reader waits with nothing held, so the turn's task sends each
    part itself (`send_now`), before `emit` returns, at the position the reader would have
    given it; the reader then sends the committed events, and none of the parts again."""
    service: Service = await make_service([])
    session = await started(service)
    reader = Reader(
        service, session.run_id, send_now=(lambda event: True) if from_the_turn else None
    )
    await reader.until(lambda got: len(got) == 1)  # run.started (committed)

    held = hold(service)
    await asyncio.sleep(0)  # the reader is back waiting
    await say(session, "Hel")
    if from_the_turn:
        assert reader.direct == [1]  # sent within the emit: no task switch
    await reader.until(lambda got: len(got) == 2)
    first = reader.events[1]
    # Part 1 after event 1, in the delta event it joins (seq 2): the stream's position `1.1`.
    assert (first.seq, first.data) == (2, {"delta": "Hel", "after": 1, "part": 1})
    async with asyncio.timeout(WAIT_S):
        await held.waiting.wait()  # its batch waits: nothing of it is in the database
    assert [e.seq for e in await service.events(session.run_id)] == [1]
    # The held batch took event 2; the next deltas make event 3 and still go out at once.
    await say(session, "lo", " world")
    assert reader.direct == ([1, 2, 3] if from_the_turn else [])
    await reader.until(lambda got: len(got) == 4)
    assert [(e.seq, e.data["after"], e.data["part"]) for e in reader.events[1:]] == [
        (2, 1, 1),
        (3, 1, 2),
        (3, 1, 3),
    ]
    assert [e.seq for e in await service.events(session.run_id)] == [1]

    held.release()
    await finish_turn(session, "Hello world")
    got = await reader.finished()
    # The committed events are not sent again: their parts were all of them.
    assert text_of(got) == "Hello world"
    assert non_deltas(got) == [
        (1, EventType.RUN_STARTED),
        (4, EventType.MESSAGE),
        (5, EventType.RUN_FINISHED),
    ]
    stored = await service.events(session.run_id)
    assert [e.data for e in stored[1:3]] == [
        {"delta": "Hel"},
        {"delta": "lo world", "parts": [2, 6]},
    ]


async def test_a_reader_in_another_process_resumes_after_part_k_exactly(
    make_service: ServiceFactory, hold: HoldFactory
) -> None:
    running: Service = await make_service([])
    other: Service = await make_service([])  # another process: its own bus, committer, runner
    session = await started(running)
    held = hold(running)
    await say(session, "Hel", "lo", " world")
    held.release()
    await finish_turn(session, "Hello world")

    for parts, rest in [(0, "Hello world"), (1, "lo world"), (2, " world"), (3, "")]:
        got = await Reader(other, session.run_id, after=1, parts=parts).finished()
        assert text_of(got) == rest, parts
        assert non_deltas(got) == [(3, EventType.MESSAGE), (4, EventType.RUN_FINISHED)]
        if rest and parts:
            assert got[0].data == {"delta": rest, "after_part": parts}
    # A plain seq resumes after that event, as before.
    got = await Reader(other, session.run_id, after=2).finished()
    assert [e.seq for e in got] == [3, 4]


async def test_a_reader_that_missed_a_part_gets_the_text_from_the_commit(
    make_service: ServiceFactory, hold: HoldFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    service: Service = await make_service([])
    session = await started(service)
    reader = Reader(service, session.run_id)
    await reader.until(lambda got: len(got) == 1)
    hold(service)
    # Part 1 never reaches this reader (as if it subscribed after it): part 2 cannot follow.
    publish = service.bus.publish_part
    monkeypatch.setattr(service.bus, "publish_part", lambda p: p.index > 1 and publish(p))
    await say(session, "Hel", "lo")
    await asyncio.sleep(0.05)
    assert [e.type for e in reader.events] == [EventType.RUN_STARTED]
    hold_release(service)
    await finish_turn(session, "Hello")
    got = await reader.finished()
    assert text_of(got) == "Hello"
    assert got[1].data == {"delta": "Hello", "parts": [3, 2]}  # the committed event, whole


async def test_parts_never_committed_leave_the_retry_to_follow_whole(
    make_service: ServiceFactory, hold: HoldFactory
) -> None:
    """The worker that streamed the parts lost its run before committing them (as if it died);
    a client that saw up to `1.2` resumes in another process with the retry's events."""
    running: Service = await make_service([])
    other: Service = await make_service([])
    session = await started(running)
    reader = Reader(running, session.run_id)
    await reader.until(lambda got: len(got) == 1)
    held = hold(running)
    await say(session, "Dead ", "attempt")
    await reader.until(lambda got: len(got) == 3)
    assert [(e.data["after"], e.data["part"]) for e in reader.events[1:]] == [(1, 1), (1, 2)]

    # Another worker takes the run over: the held batch is fenced out when it runs.
    async with running.database.write() as conn:
        await conn.execute(
            sa.update(runs)
            .where(runs.c.id == session.run_id)
            .values(lease_token=runs.c.lease_token + 1)
        )
    held.release()
    with pytest.raises(Exception, match="lease"):
        await session.renew()
    assert [e.seq for e in await running.events(session.run_id)] == [1]
    reader.task.cancel()

    retry_claim = Claim(
        run=session.claim.run, owner="w2", token=session.claim.token + 1, last_seq=1
    )
    retry = session_of(other, retry_claim)
    await retry.emit(EventType.RUN_STARTED, {"attempt": 2})
    await say(retry, "Second")
    await finish_turn(retry, "Second")

    got = await Reader(other, session.run_id, after=1, parts=2).finished()
    # Event 2 is the retry's run.started: sent whole, then the retry's text, all of it.
    assert non_deltas(got) == [
        (2, EventType.RUN_STARTED),
        (4, EventType.MESSAGE),
        (5, EventType.RUN_FINISHED),
    ]
    assert got[0].data == {"attempt": 2}
    assert text_of(got) == "Second"


async def test_parts_lost_to_an_overflow_stop_the_parts_until_the_commits(
    make_service: ServiceFactory,
) -> None:
    """A slow reader's parts overflow: it cannot tell where the event it was streaming ended,
    so it sends no later part (the next event's first part would be placed wrong) and takes the
    text from the commits. Driven through the bus and the store directly, as the committer
    does, to lose exactly the tail of one event."""
    service: Service = await make_service([])
    session = await started(service)
    run = session.claim.run
    reader = Reader(service, run.id)
    await reader.until(lambda got: len(got) == 1)

    def part(seq: int, index: int, text: str) -> Part:
        return Part(run.id, run.thread_id, seq, index, EventType.MESSAGE, run.created_at, text)

    service.bus.publish_part(part(2, 1, "a"))
    await reader.until(lambda got: len(got) == 2)
    # As many as a reader holds: the next part, the first of event 3, drops them all.
    tail = [part(2, i, "x") for i in range(2, MAX_HELD_EVENTS + 2)]
    for each in tail:
        service.bus.publish_part(each)
    service.bus.publish_part(part(3, 1, "b"))
    await asyncio.sleep(0.05)
    assert [e.data.get("part") for e in reader.events[1:]] == [1]

    def stored(seq: int, type_: EventType, data: dict[str, Any]) -> Event:
        return Event(
            run_id=run.id,
            thread_id=run.thread_id,
            seq=seq,
            type=type_,
            ts=run.created_at,
            data=data,
        )

    committed = [
        stored(
            2, EventType.MESSAGE, {"delta": "a" + "x" * len(tail), "parts": [1] * (1 + len(tail))}
        ),
        stored(3, EventType.MESSAGE, {"delta": "b"}),
        stored(4, EventType.RUN_FINISHED, {"status": "succeeded"}),
    ]
    async with service.database.write() as conn:
        await event_store.append_events(conn, committed)
    service.bus.publish(run.id, committed)
    got = await reader.finished()
    assert text_of(got) == "a" + "x" * len(tail) + "b"

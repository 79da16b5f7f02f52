"""Text deltas before their commit, on both databases: a stream in the process that runs the turn
gets each delta at once as a provisional part (seq of the event it will be merged into, `part`
k), while the commit is held; the committed event records the parts, so a reader resuming after
part k (here or in another process: another Service, its own bus) gets only the text after it;
and parts never committed (the lease lost) leave the retry's events to follow whole."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from pressloop.contracts import Event, EventType
from pressloop.runtime.bus import MAX_HELD_EVENTS, Part
from pressloop.runtime.service import Service
from pressloop.runtime.session import RunSession
from pressloop.store import events as event_store
from pressloop.store.records import Claim
from pressloop.store.schema import runs
from tests.runtime.conftest import ServiceFactory
from tests.runtime.sessions import claimed, session_of

WAIT_S = 5.0


class HeldCommits:
    """Holds the service's group committer before its next transaction until `release()`."""

    def __init__(self, service: Service, monkeypatch: pytest.MonkeyPatch) -> None:
        committer = service.runner.committer
        self.original: Callable[..., Awaitable[Any]] = committer._transaction
        self.released = asyncio.Event()
        self.waiting = asyncio.Event()  # a batch waits behind the hold
        monkeypatch.setattr(committer, "_transaction", self._held)

    async def _held(self, batch: Any) -> Any:
        self.waiting.set()
        await self.released.wait()
        return await self.original(batch)

    def release(self) -> None:
        self.released.set()


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


def hold_release(service: Service) -> None:
    """Release the hold on `service`'s commits (the patched `_transaction`'s own)."""
    transaction = service.runner.committer._transaction
    held = getattr(transaction, "__self__", None)
    assert isinstance(held, HeldCommits)
    held.release()


class Reader:
    """`service.follow(...)` in a task, collecting what it yields. With `send_now`, what the
    publisher's task sends through it is collected too (`direct`: those events' positions)."""

    def __init__(
        self,
        service: Service,
        run_id: str,
        send_now: Callable[[Event], bool] | None = None,
        **start: int,
    ) -> None:
        self.events: list[Event] = []
        self.direct: list[int] = []  # indexes in `events` of what the publisher sent
        self._new = asyncio.Event()
        self._send_now = send_now
        follow = service.follow(run_id, send_now=self._sent_now if send_now else None, **start)
        self.task = asyncio.create_task(self._read(follow))

    def _sent_now(self, event: Event) -> bool:
        assert self._send_now is not None
        if not self._send_now(event):
            return False
        self.direct.append(len(self.events))
        self.events.append(event)
        self._new.set()
        return True

    async def _read(self, events: AsyncIterator[Event]) -> None:
        async for event in events:
            self.events.append(event)
            self._new.set()

    async def until(self, check: Callable[[list[Event]], bool]) -> None:
        async with asyncio.timeout(WAIT_S):
            while not check(self.events):
                self._new.clear()
                await self._new.wait()

    async def finished(self) -> list[Event]:
        async with asyncio.timeout(WAIT_S):
            await self.task
        return self.events


def text_of(events: list[Event]) -> str:
    return "".join(e.data.get("delta", "") for e in events)


def non_deltas(events: list[Event]) -> list[tuple[int, EventType]]:
    return [(e.seq, e.type) for e in events if "delta" not in e.data]


async def _started(service: Service) -> RunSession:
    session = session_of(service, (await claimed(service, 1))[0])
    await session.emit(EventType.RUN_STARTED, {"attempt": 1})
    await session.renew()
    return session


async def _say(session: RunSession, *pieces: str) -> None:
    for piece in pieces:
        await session.emit(EventType.MESSAGE, {"delta": piece})


async def _finish(session: RunSession, text: str) -> None:
    await session.emit(EventType.MESSAGE, {"text": text, "final": True})
    await session.emit(EventType.RUN_FINISHED, {"status": "succeeded"})
    await session.renew()


@pytest.mark.parametrize("from_the_turn", [False, True], ids=["by-the-reader", "by-the-turn"])
async def test_the_first_delta_reaches_a_stream_while_its_commit_is_held(
    make_service: ServiceFactory, hold: HoldFactory, from_the_turn: bool
) -> None:
    """by-the-turn: the stream's reader waits with nothing held, so the turn's task sends each
    part itself (`send_now`), before `emit` returns, at the position the reader would have
    given it; the reader then sends the committed events, and none of the parts again."""
    service: Service = await make_service([])
    session = await _started(service)
    reader = Reader(
        service, session.run_id, send_now=(lambda event: True) if from_the_turn else None
    )
    await reader.until(lambda got: len(got) == 1)  # run.started (committed)

    held = hold(service)
    await asyncio.sleep(0)  # the reader is back waiting
    await _say(session, "Hel")
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
    await _say(session, "lo", " world")
    assert reader.direct == ([1, 2, 3] if from_the_turn else [])
    await reader.until(lambda got: len(got) == 4)
    assert [(e.seq, e.data["after"], e.data["part"]) for e in reader.events[1:]] == [
        (2, 1, 1),
        (3, 1, 2),
        (3, 1, 3),
    ]
    assert [e.seq for e in await service.events(session.run_id)] == [1]

    held.release()
    await _finish(session, "Hello world")
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
    session = await _started(running)
    held = hold(running)
    await _say(session, "Hel", "lo", " world")
    held.release()
    await _finish(session, "Hello world")

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
    session = await _started(service)
    reader = Reader(service, session.run_id)
    await reader.until(lambda got: len(got) == 1)
    hold(service)
    # Part 1 never reaches this reader (as if it subscribed after it): part 2 cannot follow.
    publish = service.bus.publish_part
    monkeypatch.setattr(service.bus, "publish_part", lambda p: p.index > 1 and publish(p))
    await _say(session, "Hel", "lo")
    await asyncio.sleep(0.05)
    assert [e.type for e in reader.events] == [EventType.RUN_STARTED]
    hold_release(service)
    await _finish(session, "Hello")
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
    session = await _started(running)
    reader = Reader(running, session.run_id)
    await reader.until(lambda got: len(got) == 1)
    held = hold(running)
    await _say(session, "Dead ", "attempt")
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
    await _say(retry, "Second")
    await _finish(retry, "Second")

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
    session = await _started(service)
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


def positions(events: list[Event]) -> list[tuple[int, int, int]]:
    """(seq, after, part) of each part sent."""
    return [(e.seq, e.data["after"], e.data["part"]) for e in events if "part" in e.data]


async def test_a_part_the_writer_refuses_is_the_reader_s_and_so_are_those_after_it(
    make_service: ServiceFactory, hold: HoldFactory
) -> None:
    """`send_now` may decline (the response has not started, or a frame is still being
    written): the reader sends that part, and a part that comes while one is held waits behind
    it, so the positions and the text are those of the reader's own path."""
    service: Service = await make_service([])
    session = await _started(service)
    refused: list[int] = []

    def second_refused(event: Event) -> bool:
        if event.data["part"] == 2:
            refused.append(2)
            return False
        return True

    reader = Reader(service, session.run_id, send_now=second_refused)
    await reader.until(lambda got: len(got) == 1)
    hold(service)
    await asyncio.sleep(0)
    await _say(session, "Hel", "lo", " world")  # 2 refused, 3 comes while 2 is held
    assert refused == [2] and reader.direct == [1]
    await reader.until(lambda got: len(got) == 4)
    assert positions(reader.events) == [(2, 1, 1), (2, 1, 2), (2, 1, 3)]
    await asyncio.sleep(0)
    await _say(session, "!")  # the reader waits again with nothing held: sent at once
    assert reader.direct == [1, 4]
    assert positions(reader.events)[3][1:] == (1, 4)
    hold_release(service)
    await _finish(session, "Hello world!")
    got = await reader.finished()
    assert text_of(got) == "Hello world!"
    assert [type_ for _, type_ in non_deltas(got)] == [
        EventType.RUN_STARTED,
        EventType.MESSAGE,
        EventType.RUN_FINISHED,
    ]
    assert len(got) == len({(e.seq, e.data.get("part")) for e in got})  # nothing twice


async def test_a_part_behind_a_committed_event_not_yet_sent_waits_for_the_reader(
    make_service: ServiceFactory,
) -> None:
    """An event committed but not yet sent (the reader is woken, not yet run): a part after it
    is not sent ahead of it. Driven through the bus, as the committer publishes."""
    service: Service = await make_service([])
    session = await _started(service)
    run = session.claim.run
    reader = Reader(service, run.id, send_now=lambda event: True)
    await reader.until(lambda got: len(got) == 1)
    await asyncio.sleep(0)
    step = Event(
        run_id=run.id,
        thread_id=run.thread_id,
        seq=2,
        type=EventType.STEP,
        ts=run.created_at,
        data={"status": "planned"},
    )
    service.bus.publish(run.id, [step])
    service.bus.publish_part(
        Part(run.id, run.thread_id, 3, 1, EventType.MESSAGE, run.created_at, "a")
    )
    assert reader.direct == []
    await reader.until(lambda got: len(got) == 3)
    assert [(e.seq, e.data.get("part")) for e in reader.events] == [(1, None), (2, None), (3, 1)]
    assert reader.events[2].data["after"] == 2
    reader.task.cancel()


async def test_no_part_goes_out_while_the_stream_is_sending(make_service: ServiceFactory) -> None:
    """The stream's task is between two frames (its last one still going out, as with a slow
    client): a part then is the reader's to send after it, never written beside it."""
    service: Service = await make_service([])
    session = await _started(service)
    sent: list[Event] = []
    events = service.follow(session.run_id, send_now=lambda event: sent.append(event) is None)
    async with asyncio.timeout(WAIT_S):
        first = await anext(events)  # the generator now waits at its yield: not for news
        assert first.type is EventType.RUN_STARTED
        await _say(session, "Hel")
        assert sent == []
        second = await anext(events)
        assert second.data == {"delta": "Hel", "after": 1, "part": 1}
        await _say(session, "lo")  # nothing for it to send: it waits for news
        assert sent == []  # still suspended at its yield: the part waits for it
        third = await anext(events)
        assert third.data == {"delta": "lo", "after": 1, "part": 2}
        waiting = asyncio.create_task(anext(events))
        await asyncio.sleep(0.01)  # the reader waits for news now
        await _say(session, " world")
        assert [e.data["part"] for e in sent] == [3]
        waiting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waiting
    await events.aclose()


async def test_a_sender_that_fails_leaves_the_part_to_the_reader_and_the_turn_unharmed(
    make_service: ServiceFactory,
) -> None:
    service: Service = await make_service([])
    session = await _started(service)

    def broken(event: Event) -> bool:
        raise ValueError("the frame cannot be made")

    reader = Reader(service, session.run_id, send_now=broken)
    await reader.until(lambda got: len(got) == 1)
    await asyncio.sleep(0)
    await _say(session, "Hel")  # the turn goes on
    await reader.until(lambda got: len(got) == 2)
    assert reader.direct == [] and reader.events[1].data["delta"] == "Hel"
    await _finish(session, "Hel")
    assert text_of(await reader.finished()) == "Hel"

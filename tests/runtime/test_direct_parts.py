"""A stream's text parts sent by the turn's task itself (`Subscription.direct`,
`runtime/stream_position.py`), on both databases: only while the stream's reader waits with
nothing held, at the position the reader would have given, never twice, never ahead of what the
reader has to send first, and never at the turn's expense."""

from __future__ import annotations

import asyncio
import contextlib

from pressloop.contracts import Event, EventType
from pressloop.runtime.bus import Part
from pressloop.runtime.service import Service
from tests.runtime.conftest import HoldFactory, ServiceFactory
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
    session = await started(service)
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
    await say(session, "Hel", "lo", " world")  # 2 refused, 3 comes while 2 is held
    assert refused == [2] and reader.direct == [1]
    await reader.until(lambda got: len(got) == 4)
    assert positions(reader.events) == [(2, 1, 1), (2, 1, 2), (2, 1, 3)]
    await asyncio.sleep(0)
    await say(session, "!")  # the reader waits again with nothing held: sent at once
    assert reader.direct == [1, 4]
    assert positions(reader.events)[3][1:] == (1, 4)
    hold_release(service)
    await finish_turn(session, "Hello world!")
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
    session = await started(service)
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
    session = await started(service)
    sent: list[Event] = []
    events = service.follow(session.run_id, send_now=lambda event: sent.append(event) is None)
    async with asyncio.timeout(WAIT_S):
        first = await anext(events)  # the generator now waits at its yield: not for news
        assert first.type is EventType.RUN_STARTED
        await say(session, "Hel")
        assert sent == []
        second = await anext(events)
        assert second.data == {"delta": "Hel", "after": 1, "part": 1}
        await say(session, "lo")  # nothing for it to send: it waits for news
        assert sent == []  # still suspended at its yield: the part waits for it
        third = await anext(events)
        assert third.data == {"delta": "lo", "after": 1, "part": 2}
        waiting = asyncio.create_task(anext(events))
        await asyncio.sleep(0.01)  # the reader waits for news now
        await say(session, " world")
        assert [e.data["part"] for e in sent] == [3]
        waiting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waiting
    await events.aclose()


async def test_a_sender_that_fails_leaves_the_part_to_the_reader_and_the_turn_unharmed(
    make_service: ServiceFactory,
) -> None:
    service: Service = await make_service([])
    session = await started(service)

    def broken(event: Event) -> bool:
        raise ValueError("the frame cannot be made")

    reader = Reader(service, session.run_id, send_now=broken)
    await reader.until(lambda got: len(got) == 1)
    await asyncio.sleep(0)
    await say(session, "Hel")  # the turn goes on
    await reader.until(lambda got: len(got) == 2)
    assert reader.direct == [] and reader.events[1].data["delta"] == "Hel"
    await finish_turn(session, "Hel")
    assert text_of(await reader.finished()) == "Hel"

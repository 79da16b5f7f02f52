"""`StreamPosition`, the rule both senders of a stream follow (the reader and the turn's task),
on its own: which part goes next, and what a committed event does to the parts held."""

from __future__ import annotations

from datetime import UTC, datetime

from pressloop.contracts import Event, EventType
from pressloop.runtime.bus import Part
from pressloop.runtime.stream_position import StreamPosition

TS = datetime(2026, 12, 5, tzinfo=UTC)


def part(seq: int, index: int, text: str = "x") -> Part:
    return Part("r", "t", seq, index, EventType.MESSAGE, TS, text)


def event(seq: int, type_: EventType, data: dict[str, object]) -> Event:
    return Event(run_id="r", thread_id="t", seq=seq, type=type_, ts=TS, data=data)


def test_parts_go_in_chain_order_and_a_new_event_starts_after_the_last_part() -> None:
    position = StreamPosition.start(1, 0)
    position.took([part(2, 1), part(2, 2), part(3, 1), part(4, 2)], lost=False)
    sent = position.sendable()
    assert [(e.seq, e.data["after"], e.data["part"]) for e in sent] == [
        (2, 1, 1),
        (2, 1, 2),
        (3, 1, 3),
    ]
    # Part 2 of event 4 cannot follow part 1 of event 3: it stays ahead, for its part 1.
    assert position.ahead == [part(4, 2)]
    assert position.continues(part(3, 2)) and position.continues(part(4, 1))
    assert not position.continues(part(4, 2)) and not position.continues(part(5, 1))


def test_a_committed_event_that_ends_dead_parts_drops_the_parts_taken_with_it() -> None:
    """The reader sent a part of an attempt that never committed it; the retry's run.started
    (seq 2) and a part of the dead attempt's next event (seq 3) are taken together: the part is
    the dead attempt's, and the retry's event 3 is another one, so it must not go out."""
    position = StreamPosition.start(1, 0)
    position.took([part(2, 1, "Dead ")], lost=False)
    assert [e.data["part"] for e in position.sendable()] == [1]
    position.took([part(3, 1, "attempt")], lost=False)
    retry_started = event(2, EventType.RUN_STARTED, {"attempt": 2})
    assert position.past(retry_started) is retry_started  # sent whole
    assert position.sendable() == []
    assert (position.seen, position.sent) == (2, 0)


def test_a_part_may_go_from_the_turn_only_while_the_reader_waits_with_nothing_held() -> None:
    position = StreamPosition.start(1, 0)
    assert not position.may_send_now(part(2, 1))  # the reader is not waiting
    position.waiting = True
    assert position.may_send_now(part(2, 1))
    assert not position.may_send_now(part(2, 2))  # not next
    position.took([part(3, 1)], lost=False)  # held: after an event not sent yet
    position.sendable()
    assert position.ahead and not position.may_send_now(part(2, 1))
    lost = StreamPosition.start(1, 1)  # resumed at 1.1: which event part 2 joins is unknown
    lost.waiting = True
    assert lost.broken and not lost.may_send_now(part(2, 2))

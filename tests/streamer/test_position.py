"""The stream process places the parts it reads from the model where the engine's numbering puts
them: a client that reconnects after any frame it got resumes exactly (nothing lost, nothing
twice) from the database, as any serving process resumes it.

The events are made by the real `Outbox` (which merges deltas that wait for a commit), committed
at random moments; the resume is the real `StreamPosition` a serving process resumes with.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pytest

from pressloop.contracts import Event, EventType
from pressloop.runtime.bus import is_stored_delta
from pressloop.runtime.outbox import Outbox
from pressloop.runtime.stream_position import StreamPosition
from pressloop.streamer.position import Diverged, HandedOverPosition

TS = datetime(2026, 12, 6, tzinfo=UTC)


@dataclass
class Turn:
    """What the engine emitted and what was committed, step by step."""

    outbox: Outbox = field(
        default_factory=lambda: Outbox(run_id="r", thread_id="t", token=1, last_seq=0)
    )
    committed: list[Event] = field(default_factory=list)
    # (kind, payload) in the order things happened in the serving process.
    happened: list[tuple[str, object]] = field(default_factory=list)
    text: list[str] = field(default_factory=list)

    def emit(self, type_: EventType, data: dict[str, object]) -> None:
        self.outbox.add_event(type_, data, TS)
        if type_ is EventType.MESSAGE and "delta" in data:
            self.text.append(str(data["delta"]))

    def call(self) -> None:
        self.happened.append(("call", self.outbox.text_position(EventType.MESSAGE)))

    def delta(self, text: str) -> None:
        self.emit(EventType.MESSAGE, {"delta": text})
        self.happened.append(("read", text))

    def commit(self) -> None:
        taken = self.outbox.take().write.events
        self.committed += taken
        self.happened.append(("commit", len(self.committed)))


def a_turn(rng: random.Random) -> Turn:
    """Tool rounds, an answer (sometimes asked twice with nothing between, as a corrective
    retry does), commits anywhere."""
    turn = Turn()
    turn.emit(EventType.RUN_STARTED, {"attempt": 1})
    for round_ in range(rng.randint(1, 3)):
        turn.emit(EventType.TOKENS, {"input": 1, "output": 1})
        if rng.random() < 0.5:
            turn.commit()
        calls = 2 if rng.random() < 0.3 else 1
        for _ in range(calls):
            turn.call()
            for i in range(rng.randint(0, 6)):
                if rng.random() < 0.3:
                    turn.commit()
                turn.delta(f"r{round_}w{i} ")
        if rng.random() < 0.5:
            turn.commit()
        turn.emit(EventType.ACTION, {"index": round_})
    turn.emit(EventType.RUN_FINISHED, {"status": "succeeded"})
    turn.commit()
    return turn


def streamed(turn: Turn, rng: random.Random) -> list[Event]:
    """The frames the stream process writes, the committed events reaching it late by a random
    number of steps (in order), the parts as they were read."""
    position = HandedOverPosition(run_id="r")
    frames: list[Event] = []
    delivered = 0
    ready = 0
    for kind, payload in turn.happened:
        if kind == "commit":
            ready = int(payload)  # type: ignore[call-overload]
        elif kind == "call":
            base, offset = payload  # type: ignore[misc]
            frames += position.call_started(base, offset)
        else:
            frames += position.read(str(payload))
        while delivered < ready and rng.random() < 0.5:
            frames += position.committed(turn.committed[delivered])
            delivered += 1
    for event in turn.committed[delivered:]:
        frames += position.committed(event)
    return frames


def frame_id(event: Event) -> tuple[int, int]:
    data = event.data
    if "after" in data and "part" in data:
        return int(data["after"]), int(data["part"])
    return event.seq, 0


def is_text(event: Event) -> bool:
    """A part, a committed delta, or the rest of one."""
    return event.type is EventType.MESSAGE and "delta" in event.data


def text_of(events: list[Event]) -> str:
    return "".join(str(e.data["delta"]) for e in events if is_text(e))


def resumed(committed: list[Event], after: int, parts: int) -> list[Event]:
    """What a serving process sends a client resuming at `after.parts` (`ServiceReads.follow`'s
    catch-up from the database)."""
    position = StreamPosition.start(after, parts)
    out: list[Event] = []
    for event in committed:
        if event.seq <= after:
            continue
        rest = position.past(event)
        if rest is not None:
            out.append(rest)
    return out


@pytest.mark.parametrize("seed", range(300))
async def test_every_frame_is_a_point_to_resume_from_exactly(seed: int) -> None:
    # (async: the outbox makes each batch's future on the running loop)
    rng = random.Random(seed)
    turn = a_turn(rng)
    frames = streamed(turn, rng)
    whole = "".join(turn.text)
    assert text_of(frames) == whole
    # Every event that is not a text delta went out once, in order.
    others = [e.seq for e in frames if not is_text(e)]
    assert others == [e.seq for e in turn.committed if not is_stored_delta(e)]
    ids = [frame_id(e) for e in frames]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    for cut in range(len(frames)):
        after, parts = ids[cut]
        rest = resumed(turn.committed, after, parts)
        assert text_of(frames[: cut + 1]) + text_of(rest) == whole, (cut, ids[cut])
        seqs = [e.seq for e in frames[: cut + 1] if "after" not in e.data] + [e.seq for e in rest]
        assert len(seqs) == len(set(seqs))


def test_parts_wait_for_the_events_before_the_call() -> None:
    position = HandedOverPosition(run_id="r")
    assert position.call_started(base=2, offset=0) == []
    assert position.read("Hel") == []  # event 2 not sent yet: the part waits
    started = Event(run_id="r", thread_id="t", seq=1, type=EventType.RUN_STARTED, ts=TS, data={})
    tokens = started.model_copy(update={"seq": 2, "type": EventType.TOKENS})
    assert position.committed(started) == [started]
    out = position.committed(tokens)
    assert out[0] is tokens
    assert [(e.data["delta"], e.data["after"], e.data["part"]) for e in out[1:]] == [("Hel", 2, 1)]
    assert [e.data["part"] for e in position.read("lo")] == [2]


def test_text_the_engine_cut_otherwise_is_refused_not_sent_wrong() -> None:
    position = HandedOverPosition(run_id="r")
    started = Event(run_id="r", thread_id="t", seq=1, type=EventType.RUN_STARTED, ts=TS, data={})
    position.committed(started)
    position.call_started(base=1, offset=0)
    position.read("Hello")
    delta = started.model_copy(
        update={"seq": 2, "type": EventType.MESSAGE, "data": {"delta": "Help"}}
    )
    with pytest.raises(Diverged):
        position.committed(delta)

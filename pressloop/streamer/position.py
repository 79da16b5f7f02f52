"""What one handed-over stream sends next: the run's committed events, and the parts of its model
call as the stream process reads them.

The serving process's own stream places a part by the engine's numbering (`runtime/bus.py`):
`N.k` is event N sent whole, then k text delta parts after it. Here the parts come from the
model's answer, not from the engine, so they are placed by counting: the engine emits one delta
for each chunk with text (`engine/model_step.py`), and the provider adapter's own code cuts the
chunks here (`relay.py`). When the call started, the serving process named the last event
queued before it (`base`) and how many parts the delta event after `base` already held then
(`offset`: the call's text joins a delta still queued, e.g. after a corrective retry): part i of
the call is then the (offset + i + 1)-th text delta part after event `base`.

A part goes out only after every event before it, at the position the engine's numbering gives
it; what the commits bring of parts already sent is not sent again (`rest_after_parts`). Each
committed delta event is checked against the parts sent of it: text that differs (the engine
cut the answer otherwise) is a `Diverged`, and the stream is ended, so the client resumes from
the database (which numbers parts by the committed lengths) rather than read wrong text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from pressloop.contracts import Event, EventType
from pressloop.runtime.bus import is_stored_delta, part_lengths, rest_after_parts

# The committed events remembered (their delta part counts) for a call that starts late.
REMEMBERED_EVENTS = 256


class Diverged(Exception):
    """The committed text differs from the parts this stream sent of it."""


@dataclass(kw_only=True)
class ModelCall:
    """A streamed model call of the run, as the serving process announced it."""

    base: int
    offset: int
    texts: list[str] = field(default_factory=list)
    # The call's parts before this one were sent, or committed before they could be.
    next: int = 0
    # A non-delta event was committed after `base`: the call's parts can no longer follow.
    over: bool = False


@dataclass(kw_only=True)
class HandedOverPosition:
    """A stream after event `seen` and `sent` parts beyond it; `call` the current model call."""

    run_id: str
    thread_id: str = ""
    seen: int = 0
    sent: int = 0
    call: ModelCall | None = None
    # The delta part count of each recent committed event (None: not a delta event).
    _counts: dict[int, int | None] = field(default_factory=dict)

    def committed(self, event: Event) -> list[Event]:
        """`event` was committed (events come in seq order): what goes out now, in order."""
        if event.seq <= self.seen:
            return []
        self.thread_id = event.thread_id
        delta = is_stored_delta(event)
        if delta:
            self._check(event)
        self._remember(event.seq, len(part_lengths(event)) if delta else None)
        rest, beyond = rest_after_parts(event, self.sent)
        self.seen, self.sent = event.seq, beyond
        call = self.call
        if call is not None and not delta and event.seq > call.base:
            call.over = True
        out = [rest] if rest is not None else []
        return out + self._sendable()

    def call_started(self, base: int, offset: int) -> list[Event]:
        """A model call began, its text to follow the `offset` parts queued after `base`."""
        self.call = ModelCall(base=base, offset=offset)
        return self._sendable()

    def read(self, text: str) -> list[Event]:
        """The current call's next part was read from the model."""
        if self.call is None:
            return []
        self.call.texts.append(text)
        return self._sendable()

    def _covered(self, call: ModelCall) -> int | None:
        """The parts after `call.base` that committed events brought (those after `seen` not
        yet); None when an event that is not a text delta came after `call.base`."""
        total = 0
        for seq in range(call.base + 1, self.seen + 1):
            if seq not in self._counts:
                return None  # forgotten: too long ago to place a part by
            count = self._counts[seq]
            if count is None:
                return None
            total += count
        return total

    def _sendable(self) -> list[Event]:
        call = self.call
        if call is None or call.over or self.seen < call.base:
            return []
        covered = self._covered(call)
        if covered is None:
            call.over = True
            return []
        out: list[Event] = []
        while call.next < len(call.texts):
            place = call.offset + call.next  # among the parts after `call.base`
            wanted = covered + self.sent
            if place > wanted:
                break  # parts before it were never sent here: their commit brings them
            if place == wanted:
                text = call.texts[call.next]
                out.append(self._part(text))
                self.sent += 1
            call.next += 1
        return out

    def _part(self, text: str) -> Event:
        """The next part, at position `seen.(sent + 1)`, in the delta event after `seen`."""
        return sent_part_event(
            self.run_id, self.thread_id, self.seen + 1, text, self.seen, self.sent + 1
        )

    def _check(self, event: Event) -> None:
        """The parts sent of `event` (it is the event after `seen`) carried its text."""
        call = self.call
        if call is None or call.over or self.sent == 0 or self.seen < call.base:
            return
        covered = self._covered(call)
        if covered is None:
            return
        lengths = part_lengths(event)
        text = event.data["delta"]
        start = 0
        for k, length in enumerate(lengths[: self.sent]):
            index = covered + k - call.offset  # the call's part sent as this one
            piece = text[start : start + length]
            start += length
            if 0 <= index < call.next and call.texts[index] != piece:
                raise Diverged(
                    f"event {event.seq}'s part {k + 1} is {piece!r}, the stream sent "
                    f"{call.texts[index]!r}"
                )

    def _remember(self, seq: int, count: int | None) -> None:
        self._counts[seq] = count
        if len(self._counts) > REMEMBERED_EVENTS:
            del self._counts[min(self._counts)]


def sent_part_event(run_id: str, thread_id: str, seq: int, text: str, after: int, k: int) -> Event:
    """A part as the stream sends it, as `runtime/stream_position.sent_part` makes it. Its seq is
    the delta event after N; a commit taken while the model went on may put it in a later one
    (the position `N.k`, what a client resumes by, is exact either way)."""
    return Event.model_construct(
        run_id=run_id,
        thread_id=thread_id,
        seq=seq,
        type=EventType.MESSAGE,
        ts=datetime.now(UTC),
        data={"delta": text, "after": after, "part": k},
    )

"""In-process delivery of run events to the readers in this process.

The database is the record: any API process can serve any stream from it, and a reader that
reconnects reads what it missed there. But a stream in the process that runs the turn need not
read back what this process has just committed: the committer publishes each batch's events
here, after the commit, and a reader takes them from its subscription when they continue what it
has seen (seq numbers without a gap). Anything else — a gap, an overflow, a bare wake-up (a
status change with no event), a timeout — sends the reader back to the database.

Text deltas also come here before their commit, as provisional parts (`publish_part`), so the
first token does not wait for the database. A `Part` is one delta as the engine emitted it: the
seq of the (queued, not yet committed) delta event it is merged into, and its index there. The
committed event records its parts' lengths (`"parts"`, when it merged more than one). A stream
places a part after the last event it sent whole, N: `N.k` is event N, then the first k parts of
the text delta events that follow it (one event, or several when a commit took the first while
the model went on). A reader resuming at `N.k`, in any process, skips those k parts' text
(`rest_after_parts`): what was committed of them is not sent again, what was not was never
committed (the worker died) and the retry's events follow whole. A reader sends a part only
after every event before it (so a part never overtakes an event queued earlier, and N is always
committed), and only when it knows which event each part it sent belongs to (no part lost).
A reader that waits with nothing held may send a part from the publisher's task itself
(`Subscription.direct`, `runtime/stream_position.py`): the same rule, one task switch less.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pressloop.contracts import Event, EventType

# A reader that stops taking (a slow client) holds at most this many events; beyond it they are
# dropped and the reader reads them from the database instead.
MAX_HELD_EVENTS = 2000

# Events whose text streams in pieces: one per model token, merged while they wait for a commit.
DELTA_TYPES = frozenset({EventType.MESSAGE, EventType.THINKING})


def is_delta(type_: EventType, data: dict[str, Any]) -> bool:
    """A text delta as the engine emits it (`{"delta": text}`), not a final message."""
    return type_ in DELTA_TYPES and data.keys() == {"delta"}


def is_stored_delta(event: Event) -> bool:
    """A committed text delta event: one delta, or several merged (`"parts"`)."""
    return event.type in DELTA_TYPES and event.data.keys() in ({"delta"}, {"delta", "parts"})


def part_lengths(event: Event) -> list[int]:
    """The lengths (in code points) of the parts a committed delta event merged."""
    parts = event.data.get("parts")
    return [int(n) for n in parts] if parts else [len(event.data["delta"])]


def rest_after_parts(event: Event, sent: int) -> tuple[Event | None, int]:
    """`event` for a reader that has sent `sent` parts after the event before it: what is left
    of it to send (None: nothing), and how many of those parts are beyond it.

    A delta event takes up to all its parts; the rest of its text goes out (`"after_part"`:
    how many of its parts were sent before). Any other event ends the count: the parts beyond
    the committed ones were of an attempt that died before committing them (every attempt starts
    with `run.started`, so a retry's event never continues a delta), and it goes out whole.
    """
    if sent <= 0 or not is_stored_delta(event):
        return event, 0
    lengths = part_lengths(event)
    if sent >= len(lengths):
        return None, sent - len(lengths)
    cut = sum(lengths[:sent])
    rest = {"delta": event.data["delta"][cut:], "after_part": sent}
    return event.model_copy(update={"data": rest}), 0


@dataclass(frozen=True, slots=True)
class Part:
    """One text delta before its commit: part `index` (from 1) of the delta event `seq`."""

    run_id: str
    thread_id: str
    seq: int
    index: int
    type: EventType
    ts: datetime
    text: str


class Subscription:
    """One reader's inbox for one run: the committed events it has not taken, the provisional
    parts (if it asked for them), and a wake-up."""

    def __init__(self, *, parts: bool = False) -> None:
        self.parts = parts
        self._events: list[Event] = []
        self._parts: list[Part] = []
        # Parts were dropped (an overflow, or withdrawn: their run's writes failed) since the
        # reader last took them: it cannot tell which event later parts continue.
        self._parts_lost = False
        self._ready = asyncio.Event()
        # The reader's way to send a part at once, from the publisher's task, when it waits
        # with nothing held (`ServiceReads.follow`'s `send_now`): True when the part went out.
        self.direct: Callable[[Part], bool] | None = None

    def deliver(self, events: Sequence[Event]) -> None:
        if len(self._events) + len(events) > MAX_HELD_EVENTS:
            self._events.clear()  # the reader finds the gap and reads the database
        else:
            self._events.extend(events)
        self._ready.set()

    def deliver_part(self, part: Part) -> None:
        # The position's rule alone refuses a part that does not continue what the reader sent;
        # news it has not taken yet sends it to the reader all the same: the reader goes first.
        nothing_held = not (self._events or self._parts or self._parts_lost)
        if self.direct is not None and nothing_held and self.direct(part):
            return  # sent: the reader sleeps on
        if len(self._parts) >= MAX_HELD_EVENTS:
            self.drop_parts()  # the committed events bring their text
        self._parts.append(part)
        self._ready.set()

    def drop_parts(self) -> None:
        self._parts.clear()
        self._parts_lost = True
        self._ready.set()

    def wake(self) -> None:
        self._ready.set()

    def take(self) -> list[Event]:
        events, self._events = self._events, []
        return events

    def take_parts(self) -> tuple[list[Part], bool]:
        """The parts held, and whether any were dropped before them."""
        parts, lost = self._parts, self._parts_lost
        self._parts, self._parts_lost = [], False
        return parts, lost

    async def wait(self, timeout_s: float) -> bool:
        """Wait for news; True when events or parts are held, False after a bare wake-up or a
        timeout."""
        if not self._events and not self._parts:
            try:
                async with asyncio.timeout(timeout_s):
                    await self._ready.wait()
            except TimeoutError:
                pass
        self._ready.clear()
        return bool(self._events or self._parts)


class EventBus:
    def __init__(self) -> None:
        self._subscriptions: dict[str, set[Subscription]] = defaultdict(set)
        # Runs whose text a stream process writes (`runtime/stream_relays.py`): their deltas
        # reach the person without this process's parts, and need not hurry to the database.
        self._streamed_elsewhere: set[str] = set()

    def publish(self, run_id: str, events: Sequence[Event]) -> None:
        """`events` of `run_id` were committed (in seq order)."""
        for subscription in self._subscriptions.get(run_id, ()):
            subscription.deliver(events)

    def wants_parts(self, run_id: str) -> bool:
        """Someone here streams `run_id` (so a provisional part is worth making)."""
        return any(s.parts for s in self._subscriptions.get(run_id, ()))

    def streamed(self, run_id: str) -> bool:
        """A person gets `run_id`'s text as it comes, from here or from a stream process: its
        deltas may wait for a later commit (`Committer.mark(soon=True)`)."""
        return run_id in self._streamed_elsewhere or self.wants_parts(run_id)

    def streamed_elsewhere(self, run_id: str, elsewhere: bool) -> None:
        if elsewhere:
            self._streamed_elsewhere.add(run_id)
        else:
            self._streamed_elsewhere.discard(run_id)

    def publish_part(self, part: Part) -> None:
        """A text delta of `part.run_id`, not committed yet."""
        for subscription in self._subscriptions.get(part.run_id, ()):
            if subscription.parts:
                subscription.deliver_part(part)

    def withdraw_parts(self, run_id: str) -> None:
        """The parts published for `run_id` will never be committed (its writes failed: the
        lease is lost): readers forget those they hold."""
        for subscription in self._subscriptions.get(run_id, ()):
            if subscription.parts:
                subscription.drop_parts()

    def notify(self, run_id: str) -> None:
        """Something about `run_id` changed without an event: its readers look again."""
        for subscription in self._subscriptions.get(run_id, ()):
            subscription.wake()

    def subscribe(self, run_id: str, *, parts: bool = False) -> Subscription:
        """A subscription to `run_id`'s committed events, and with `parts` to its provisional
        text deltas too (streams want them; a waiter for the run's end does not)."""
        subscription = Subscription(parts=parts)
        self._subscriptions[run_id].add(subscription)
        return subscription

    def unsubscribe(self, run_id: str, subscription: Subscription) -> None:
        self._subscriptions[run_id].discard(subscription)
        if not self._subscriptions[run_id]:
            del self._subscriptions[run_id]

    def subscribed(self, run_id: str) -> bool:
        return run_id in self._subscriptions

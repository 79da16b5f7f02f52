"""In-process delivery of committed run events to the readers in this process.

The database is the record: any API process can serve any stream from it, and a reader that
reconnects reads what it missed there. But a stream in the process that runs the turn need not
read back what this process has just committed: the committer publishes each batch's events
here, after the commit, and a reader takes them from its subscription when they continue what it
has seen (seq numbers without a gap). Anything else — a gap, an overflow, a bare wake-up (a
status change with no event), a timeout — sends the reader back to the database.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Sequence

from pressloop.contracts import Event

# A reader that stops taking (a slow client) holds at most this many events; beyond it they are
# dropped and the reader reads them from the database instead.
MAX_HELD_EVENTS = 2000


class Subscription:
    """One reader's inbox for one run: the committed events it has not taken, and a wake-up."""

    def __init__(self) -> None:
        self._events: list[Event] = []
        self._ready = asyncio.Event()

    def deliver(self, events: Sequence[Event]) -> None:
        if len(self._events) + len(events) > MAX_HELD_EVENTS:
            self._events.clear()  # the reader finds the gap and reads the database
        else:
            self._events.extend(events)
        self._ready.set()

    def wake(self) -> None:
        self._ready.set()

    def take(self) -> list[Event]:
        events, self._events = self._events, []
        return events

    async def wait(self, timeout_s: float) -> bool:
        """Wait for news; True when events are held, False after a bare wake-up or a timeout."""
        if not self._events:
            try:
                async with asyncio.timeout(timeout_s):
                    await self._ready.wait()
            except TimeoutError:
                pass
        self._ready.clear()
        return bool(self._events)


class EventBus:
    def __init__(self) -> None:
        self._subscriptions: dict[str, set[Subscription]] = defaultdict(set)

    def publish(self, run_id: str, events: Sequence[Event]) -> None:
        """`events` of `run_id` were committed (in seq order)."""
        for subscription in self._subscriptions.get(run_id, ()):
            subscription.deliver(events)

    def notify(self, run_id: str) -> None:
        """Something about `run_id` changed without an event: its readers look again."""
        for subscription in self._subscriptions.get(run_id, ()):
            subscription.wake()

    def subscribe(self, run_id: str) -> Subscription:
        subscription = Subscription()
        self._subscriptions[run_id].add(subscription)
        return subscription

    def unsubscribe(self, run_id: str, subscription: Subscription) -> None:
        self._subscriptions[run_id].discard(subscription)
        if not self._subscriptions[run_id]:
            del self._subscriptions[run_id]

    def subscribed(self, run_id: str) -> bool:
        return run_id in self._subscriptions

"""Where one stream of a run's events is, and which provisional part may go out next.

A stream (`ServiceReads.follow`) sends committed events in seq order and, in the process that
runs the turn, text delta parts before their commit (`runtime/bus.py`). Its position is `N.k`:
event N sent whole, then k parts of the delta events after it. This object is that position and
the rule for the next part: part `chain_k + 1` of event `chain_seq`, or part 1 of the event
after it once `chain_k` > 0 (a new event starts only after the last part of the one before).

It is shared by the two senders of one stream: the reader's own loop, and the turn's task, which
sends a part at once when the reader waits with nothing held (`Subscription.direct`): saving the
task switch to the reader puts the token on the wire one loop iteration earlier, the largest
wait left on the first token's path under load (docs/benchmarks.md, section 3m).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pressloop.contracts import Event
from pressloop.runtime.bus import MAX_HELD_EVENTS, Part, rest_after_parts


@dataclass(kw_only=True)
class StreamPosition:
    """A stream after event `seen` and `sent` parts beyond it."""

    seen: int
    sent: int
    # Where the next part may go (above); unknown (`broken`) while parts were lost or were sent
    # by another process (a reader resuming at `N.k`), until the commits bring the text.
    chain_seq: int
    chain_k: int = 0
    broken: bool = False
    # Parts of an event whose predecessor is not sent yet.
    ahead: list[Part] = field(default_factory=list)
    # The reader waits for news, everything it took sent: the turn's task may send a part.
    waiting: bool = False

    @classmethod
    def start(cls, after: int, parts: int) -> StreamPosition:
        return cls(seen=after, sent=parts, chain_seq=after + 1, broken=parts > 0)

    def took(self, parts: list[Part], lost: bool) -> None:
        """The reader took `parts` from its subscription; `lost`: parts were dropped before
        them, so which event a later part continues is unknown until the commits."""
        if lost:
            self.ahead.clear()
            self.broken = self.broken or self.sent > 0
        self.ahead += parts

    def past(self, event: Event) -> Event | None:
        """`event` committed, in order: what of it is left to send (None: its parts were all
        sent), the position moved past it."""
        rest, beyond = rest_after_parts(event, self.sent)
        if self.sent and not beyond and rest is event:
            self.ahead.clear()  # parts sent were never committed: any held are as dead
        self.seen, self.sent = event.seq, beyond
        if not self.sent:
            self.chain_seq, self.chain_k, self.broken = self.seen + 1, 0, False
        return rest

    def continues(self, part: Part) -> bool:
        """`part` is the next part this stream may send."""
        if part.seq == self.chain_seq:
            return part.index == self.chain_k + 1
        return part.seq == self.chain_seq + 1 and part.index == 1 and self.chain_k > 0

    def as_sent(self, part: Part) -> Event:
        """`part` as this stream sends it next (it `continues`): at position `seen.(sent+1)`,
        in the delta event it joins."""
        return sent_part(part, self.seen, self.sent + 1)

    def mark_sent(self, part: Part) -> None:
        """`part` (which `continues`) went out."""
        if part.seq == self.chain_seq:
            self.chain_k += 1
        else:
            self.chain_seq, self.chain_k = part.seq, 1
        self.sent += 1

    def sendable(self) -> list[Event]:
        """The parts held (`ahead`) that go out now, as sent, in order; those of an event not
        sent yet stay ahead."""
        if not self.ahead or self.broken:
            return []
        out: list[Event] = []
        later: list[Part] = []
        for part in self.ahead:
            if self.broken:
                later = []  # sent only after the commits: which parts come then
                break
            if self.continues(part):
                out.append(self.as_sent(part))
                self.mark_sent(part)
            elif part.seq > self.chain_seq:
                later.append(part)  # after an event not sent yet
            else:
                # Sent already, or after a part this reader never got (it subscribed later, or
                # it was dropped): wait for the commit, which brings it.
                self.broken = self.broken or (
                    part.seq == self.chain_seq and part.index > self.chain_k
                )
        self.ahead = later if len(later) <= MAX_HELD_EVENTS else []
        return out

    def may_send_now(self, part: Part) -> bool:
        """The turn's task may send `part` itself: the reader waits with nothing held."""
        return self.waiting and not self.broken and not self.ahead and self.continues(part)


def sent_part(part: Part, after: int, k: int) -> Event:
    """A part as a stream sends it: at position `after.k`, in the delta event it joins."""
    return Event.model_construct(
        run_id=part.run_id,
        thread_id=part.thread_id,
        seq=part.seq,
        type=part.type,
        ts=part.ts,
        data={"delta": part.text, "after": after, "part": k},
    )

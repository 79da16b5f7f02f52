"""The CLI's live view with text deltas sent before their commit: the parts shown, then the
stored events read after the live stream (`pressloop chat`), show every word once."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from typing import Any

from rich.console import Console

from pressloop.cli_render import EventPrinter
from pressloop.contracts import Event, EventType

TS = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)


def event(seq: int, type_: EventType, data: dict[str, Any]) -> Event:
    return Event(run_id="run_1", thread_id="thr_1", seq=seq, type=type_, ts=TS, data=data)


def printer() -> tuple[EventPrinter, io.StringIO]:
    out = io.StringIO()
    return EventPrinter(Console(file=out, width=200, color_system=None)), out


def test_parts_then_the_stored_events_show_each_word_once() -> None:
    shown, out = printer()
    shown.show(event(1, EventType.RUN_STARTED, {"attempt": 1}))
    # Live: three parts after event 1 (event 2 took one before its commit, event 3 two).
    shown.show(event(2, EventType.MESSAGE, {"delta": "Hel", "after": 1, "part": 1}))
    shown.show(event(3, EventType.MESSAGE, {"delta": "lo", "after": 1, "part": 2}))
    shown.show(event(3, EventType.MESSAGE, {"delta": " wor", "after": 1, "part": 3}))
    assert (shown.last_seq, shown.parts_shown) == (1, 3)
    # The live stream stopped there; what is stored after event 1 is read and shown.
    for stored in [
        event(2, EventType.MESSAGE, {"delta": "Hel"}),
        event(3, EventType.MESSAGE, {"delta": "lo world", "parts": [2, 4, 2]}),
        event(4, EventType.MESSAGE, {"text": "Hello world", "final": True}),
        event(5, EventType.RUN_FINISHED, {"status": "succeeded"}),
    ]:
        shown.show(stored)
    assert out.getvalue().splitlines()[1] == "Hello world"  # the streamed line, each word once
    assert (shown.last_seq, shown.parts_shown) == (5, 0)


def test_parts_of_a_dead_attempt_are_followed_by_the_retry_whole() -> None:
    shown, out = printer()
    shown.show(event(1, EventType.RUN_STARTED, {"attempt": 1}))
    shown.show(event(2, EventType.MESSAGE, {"delta": "never ", "after": 1, "part": 1}))
    shown.show(event(2, EventType.RUN_STARTED, {"attempt": 2}))  # the retry's event 2
    shown.show(event(3, EventType.MESSAGE, {"delta": "Again"}))
    assert "never " in out.getvalue() and "attempt 2" in out.getvalue()
    assert out.getvalue().endswith("Again")
    assert (shown.last_seq, shown.parts_shown) == (3, 0)

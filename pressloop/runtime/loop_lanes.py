"""`pressloop serve`'s event loop: a person's stream goes ahead of the rest of the work.

asyncio runs ready callbacks first in, first out, one iteration at a time: under load, a token
that reaches a model connection is read after the rest of the current iteration, and the task
that relays it runs after everything the iteration scheduled before it: every other turn's
steps, commits and requests (docs/benchmarks.md, section 3o). This loop is asyncio's own
selector loop with two lanes of ready callbacks, the urgent one always served first:

- what the selector reports (a socket readable or writable) goes in the urgent lane: reading is
  short, and it is how a token comes in;
- so do the wakeups of the tasks marked urgent (`urgent()`: a turn while it reads a model's
  stream, `stream_urgency.py`), even in the middle of an iteration;
- between two callbacks, when the loop has not polled its sockets for `poll_every_s`, it polls
  them without waiting, so a token that came meanwhile is read now, not after the iteration.

Everything else keeps its order. Callbacks of one future run in the order they were added:
asyncio relies on it (`sock_connect`'s clean-up runs before the connection's transport is
made), so a task's wakeup that goes ahead takes the same future's earlier callbacks with it.

The loop reaches into asyncio's internals in two places, both checked by tests: its ready
queue (`_ready`, which `_run_once` counts and pops) becomes the two lanes, and the poll between
callbacks is the selector loop's own (`_selector`, `_process_events`).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

DEFAULT_POLL_EVERY_S = 0.001

# Every callback the loop runs goes through `_Lanes.append` and `popleft`: the deque's own
# methods are called unbound (no `super()` object a call), and a future is known by its type
# first (asyncio's C futures and tasks), `isfuture` only for anything else.
_append = deque.append
_popleft = deque.popleft
_length = deque.__len__
_FUTURE_TYPES = frozenset({asyncio.Future, asyncio.Task})
_get_ident = threading.get_ident
_monotonic = time.monotonic


class _Lanes(deque[asyncio.Handle]):
    """The loop's ready queue: the normal lane (this deque) behind the urgent one."""

    def __init__(self, loop: LanesLoop, poll_every_s: float) -> None:
        super().__init__()
        self.urgent: deque[asyncio.Handle] = deque()
        self._loop = loop
        self._urgent_tasks = loop.urgent_tasks
        self._poll_every_s = poll_every_s
        self.polling = False  # the selector's callbacks are being queued
        self.polled_at = _monotonic()
        # The future whose callbacks are being queued, those in the normal lane, and whether
        # one went ahead (the rest follow it).
        self._future: object | None = None
        self._future_behind: list[asyncio.Handle] = []
        self._future_urgent = False

    def append(self, handle: asyncio.Handle) -> None:
        # A cancelled timer that came due (the loop skips it), or a callback from another
        # thread (`call_soon_threadsafe`): the normal lane, in order.
        if handle._cancelled or _get_ident() != self._loop.thread_id:
            _append(self, handle)
            return
        args = handle._args
        future = None  # a future's callbacks are called with the future alone
        if len(args) == 1 and (type(args[0]) in _FUTURE_TYPES or asyncio.isfuture(args[0])):
            future = args[0]
        if future is None or future is not self._future:
            self._future, self._future_urgent = future, False
            if self._future_behind:
                self._future_behind.clear()
        if (
            self.polling
            or self._future_urgent
            or (self._urgent_tasks and self._wakes_urgent_task(handle))
        ):
            if self._future_behind:
                self._move_ahead(self._future_behind)
            self._future_urgent = future is not None
            self.urgent.append(handle)
            return
        if future is not None:
            self._future_behind.append(handle)
        _append(self, handle)

    def _move_ahead(self, handles: list[asyncio.Handle]) -> None:
        """Move a future's callbacks from the normal lane to the urgent one, in their order."""
        moved: list[asyncio.Handle] = []
        for handle in reversed(handles):
            if super().__len__() == 0:  # run already (cannot be while its future's are queued)
                break
            # Queued last, one after the other (no indexing: `len` counts both lanes).
            last = super().pop()
            if last is not handle:  # another thread's callback came between them
                super().append(last)
                try:
                    super().remove(handle)
                except ValueError:  # not queued any more: nothing to move
                    continue
            moved.append(handle)
        moved.reverse()
        self.urgent.extend(moved)
        handles.clear()

    def _wakes_urgent_task(self, handle: asyncio.Handle) -> bool:
        callback = handle._callback  # type: ignore[attr-defined]
        task = getattr(callback, "__self__", None)  # a task's step or its wakeup
        return isinstance(task, asyncio.Task) and task in self._urgent_tasks

    def popleft(self) -> asyncio.Handle:
        self._future = None  # callbacks queued from here on are another future's
        if not self.urgent and _monotonic() - self.polled_at >= self._poll_every_s:
            self._loop.poll_now()
        if self.urgent:
            return self.urgent.popleft()
        return _popleft(self)

    def clear(self) -> None:
        self.urgent.clear()
        self._future, self._future_urgent = None, False
        self._future_behind.clear()
        super().clear()

    def __len__(self) -> int:
        return _length(self) + len(self.urgent)

    def __bool__(self) -> bool:
        return bool(self.urgent) or _length(self) > 0


class LanesLoop(asyncio.SelectorEventLoop):
    """asyncio's selector loop with an urgent lane (see the module's docstring)."""

    def __init__(self, poll_every_s: float = DEFAULT_POLL_EVERY_S) -> None:
        super().__init__()
        self.urgent_tasks: set[asyncio.Task[Any]] = set()
        self.thread_id = threading.get_ident()
        self._lanes = _Lanes(self, poll_every_s)
        self._ready = self._lanes

    def run_forever(self) -> None:
        self.thread_id = threading.get_ident()
        super().run_forever()

    def _process_events(self, event_list: Any) -> None:
        lanes = self._lanes
        lanes.polling, lanes.polled_at = True, time.monotonic()
        try:
            super()._process_events(event_list)  # type: ignore[misc]
        finally:
            lanes.polling = False

    def poll_now(self) -> None:
        """Queue what the sockets have now, without waiting (between two callbacks)."""
        self._process_events(self._selector.select(0))  # type: ignore[attr-defined]


@contextmanager
def urgent() -> Iterator[bool]:
    """The current task's wakeups go in the urgent lane while this lasts, on a `LanesLoop`
    (elsewhere nothing changes). Yields whether it marked the task."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    if not isinstance(loop, LanesLoop) or task is None:
        yield False
        return
    loop.urgent_tasks.add(task)
    try:
        yield True
    finally:
        loop.urgent_tasks.discard(task)

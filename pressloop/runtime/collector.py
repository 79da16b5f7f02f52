"""Python's cyclic garbage collector in a long-running process (`pressloop serve`, `pressloop
worker`).

A collection stops the event loop for as long as it takes to walk the generations it collects,
and every stream the process serves waits meanwhile. With the interpreter's defaults
(700, 10, 10), a full collection walked everything start-up had loaded (the model SDK,
SQLAlchemy, pydantic's schemas, FastAPI's routes): 170-230 ms each, 1-2 of them while a
`pressloop serve` carried 200 streams, and 420-640 ms of collecting in all; settled as below:
no full collection, 120-210 ms in all, the longest pause 14-24 ms (docs/benchmarks.md
section 3b).

So once start-up is done (and the configured model SDK loaded, `settle_process`), `settle`
collects once and freezes what survived (`gc.freeze`: it is not walked again; the process keeps
it all its life anyway), and sets the thresholds:

- `pressloop serve` (`SERVE_THRESHOLDS`): the young generation at the default size, so a young
  collection stays short; a middle one every 3 young ones, not 10: it walks what survived the
  young ones since the last, and under load that is most of the runs' newest state (a young
  generation holds more than its 700 objects whenever older objects die meanwhile: each death
  counts against the threshold): every 10, up to 38,000 objects, p99 22-25 ms of CPU (AMD EPYC
  25/17, 300 streams at a time for 150 s); every 3, p99 12-14 ms for the same CPU in all
  (docs/benchmarks.md, section 3n).
  A full collection only after 3,333 middle ones, the 10,000 young ones of before (still no
  sooner than the interpreter's rule: 25% more long-lived objects than the last full one left),
  since it walks every run's state in flight: the pauses a first token can meet stay short.
- `pressloop worker` (`WORKER_THRESHOLDS`): no stream waits on its loop, and with hundreds of
  runs in flight the default young size had it collecting ~550 times for 1,000 runs of 4 model
  calls (a fifth of its CPU): every 50,000 allocations leaves a few collections for the same work.

A young collection is due when the allocations outnumber the deaths by 700; while turns finish
and their older objects die, that count stalls and the young generation fills far past 700
(26,000-28,000 objects seen, 12-15 ms to walk). So `pressloop serve` also collects whenever
none ran for `PRESSLOOP_GC_YOUNG_EVERY` (`YoungCollections`; the young generation, or the middle
one when the interpreter would take it): what one collection walks is then at most what that
time allocated and kept (at most about 10 ms, against 24-27; docs/benchmarks.md, section 3n).

`PRESSLOOP_GC_THRESHOLDS` replaces either (three numbers, `gc.set_threshold`'s). `watch` times
every collection for the process's metrics (`pressloop_gc_pause_seconds`, by generation), so an
operator sees the pauses a stream meets.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable
from typing import Any

from pressloop.config import Settings
from pressloop.observability.metrics import Metrics
from pressloop.providers.factory import load_sdk

Thresholds = tuple[int, int, int]

SERVE_THRESHOLDS: Thresholds = (700, 3, 3333)
WORKER_THRESHOLDS: Thresholds = (50_000, 20, 20)


def settle(thresholds: Thresholds) -> int:
    """Collect what start-up left, freeze the rest, and collect with `thresholds` from now on;
    how many objects are frozen."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*thresholds)
    return gc.get_freeze_count()


OnPause = Callable[[int, float], None]  # (generation, seconds)


class _PauseTimer:
    """A `gc.callbacks` entry: the time from each collection's start to its stop."""

    def __init__(self, on_pause: OnPause, clock: Callable[[], float]) -> None:
        self.on_pause = on_pause
        self.clock = clock
        self.started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self.started = self.clock()
        else:
            self.on_pause(info["generation"], self.clock() - self.started)


def watch(on_pause: OnPause, clock: Callable[[], float] = time.perf_counter) -> Callable[[], None]:
    """Call `on_pause(generation, seconds)` after every collection; returns the unwatch."""
    timer = _PauseTimer(on_pause, clock)
    gc.callbacks.append(timer)
    return lambda: gc.callbacks.remove(timer)


def settle_process(settings: Settings, metrics: Metrics, default: Thresholds) -> Callable[[], None]:
    """What a serving or worker process does once start-up is done: load the model SDK (so it is
    frozen too, and not imported in the first turn), settle with the configured thresholds (else
    `default`), and time the collections in `metrics`; returns the unwatch."""
    load_sdk(settings)
    metrics.gc_settled(settle(settings.resolved_gc_thresholds(default)))
    return watch(metrics.gc_paused)


class YoungCollections:
    """Collects whenever no collection ran for `every_s`: the young generation, or the middle one
    when the interpreter would take it (`due_generation`). `watch` notes every collection, the
    interpreter's own included; a timer on the loop collects when one is due. `clock` and
    `collect` are injected for tests."""

    def __init__(
        self,
        every_s: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        collect: Callable[[int], object] = gc.collect,
    ) -> None:
        self.every_s = every_s
        self.clock = clock
        self.collect = collect
        self.last = clock()
        self._timer: asyncio.TimerHandle | None = None
        self._unwatch: Callable[[], None] | None = None

    def collected(self) -> None:
        """A collection just ended (any, the interpreter's own included)."""
        self.last = self.clock()

    def start(self, loop: asyncio.AbstractEventLoop) -> Callable[[], None]:
        """Watch the collections and keep the timer on `loop`; returns the stop."""
        self._unwatch = watch(lambda _generation, _seconds: self.collected())
        self._schedule(loop)
        return self.stop

    def tick(self) -> bool:
        """Collect if a collection is due; whether it did."""
        if self.clock() - self.last < self.every_s:
            return False
        self.collect(due_generation(gc.get_count(), gc.get_threshold()))
        self.collected()
        return True

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._unwatch is not None:
            self._unwatch()
            self._unwatch = None

    def _schedule(self, loop: asyncio.AbstractEventLoop) -> None:
        due_in = self.last + self.every_s - self.clock()
        self._timer = loop.call_later(max(due_in, 0.0), self._on_timer, loop)

    def _on_timer(self, loop: asyncio.AbstractEventLoop) -> None:
        self.tick()
        self._schedule(loop)


def due_generation(counts: tuple[int, int, int], thresholds: tuple[int, int, int]) -> int:
    """The generation a collection now takes, as the interpreter chooses it, short of the oldest:
    the middle one once enough young collections ran since the last middle one (a young
    collection made here counts as one; only the interpreter's own collections check this,
    so without it the middle generation would grow across all of those made here), else the
    young one. Never a full collection: the interpreter's own rule for those stands."""
    return 1 if counts[1] > thresholds[1] else 0


def collect_young_every(every_s: float) -> Callable[[], None]:
    """`YoungCollections` on the running loop (`every_s` 0: none); returns the stop."""
    if every_s <= 0:
        return lambda: None
    return YoungCollections(every_s).start(asyncio.get_running_loop())

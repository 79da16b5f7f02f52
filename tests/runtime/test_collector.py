"""A long-running process settles its heap once start-up is done (`runtime/collector.py`): the
garbage start-up left is collected, what survived is frozen (no collection walks it again), the
thresholds are the process's or PRESSLOOP_GC_THRESHOLDS; every collection is timed for the
metrics. `pressloop serve` doing it is checked on its `/metrics` (tests/observability), the
model SDK loaded before the freeze here, in fresh interpreters."""

from __future__ import annotations

import asyncio
import gc
import itertools
import json
import subprocess
import sys
import weakref
from collections.abc import Iterator

import pytest
from pydantic import ValidationError

from pressloop.config import Settings
from pressloop.observability.metrics import Metrics
from pressloop.runtime import collector
from tests.support.processes import ROOT, isolated_env


class Node:
    """A container that can sit in a reference cycle."""

    def __init__(self) -> None:
        self.other: Node | None = None


@pytest.fixture
def restored_collector() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


def cycle() -> Node:
    first, second = Node(), Node()
    first.other, second.other = second, first
    return first


def tracked(obj: object) -> bool:
    """`obj` is in one of the generations a collection walks (frozen objects are in none)."""
    return any(o is obj for o in gc.get_objects())


def test_settle_collects_start_up_garbage_and_freezes_the_rest(restored_collector: None) -> None:
    garbage = weakref.ref(cycle())  # unreachable, kept alive only by its cycle
    kept = cycle()
    assert garbage() is not None and tracked(kept)

    frozen = collector.settle((700, 10, 1000))

    assert garbage() is None  # collected, not frozen for the process's life
    assert not tracked(kept)  # frozen: no collection walks it again
    assert frozen == gc.get_freeze_count() > 0
    assert gc.get_threshold() == (700, 10, 1000)
    made_after = cycle()
    assert tracked(made_after)  # what the process makes later is collected as usual


def test_watch_times_every_collection_by_generation() -> None:
    ticks = itertools.count(start=0.0, step=0.25)  # each call of the clock: 0.25 s later
    pauses: list[tuple[int, float]] = []
    unwatch = collector.watch(lambda gen, s: pauses.append((gen, s)), clock=lambda: next(ticks))
    try:
        gc.collect(1)
        gc.collect(2)
    finally:
        unwatch()
    assert (1, 0.25) in pauses and (2, 0.25) in pauses
    count = len(pauses)
    gc.collect(0)
    assert len(pauses) == count  # unwatched


def test_the_metrics_count_each_collection_by_generation() -> None:
    metrics = Metrics(process=False)

    def count(generation: str) -> float:
        value = metrics.registry.get_sample_value(
            "pressloop_gc_pause_seconds_count", {"generation": generation}
        )
        assert value is not None  # every generation's series is there from the start
        return value

    assert count("2") == 0
    unwatch = collector.watch(metrics.gc_paused)
    try:
        gc.collect(2)
        gc.collect(2)
    finally:
        unwatch()
    watched = count("2")
    assert watched >= 2
    gc.collect(2)
    assert count("2") == watched  # unwatched: no more


def test_gc_thresholds_setting() -> None:
    process_default = (50_000, 20, 20)
    assert Settings().resolved_gc_thresholds(process_default) == process_default
    custom = Settings(gc_thresholds=" 2000, 5 ,100 ")
    assert custom.resolved_gc_thresholds(process_default) == (2000, 5, 100)
    for wrong in ("1,2", "a,b,c", "1,2,3,4", "-1,2,3"):
        with pytest.raises(ValidationError, match="gc_thresholds|PRESSLOOP_GC_THRESHOLDS"):
            Settings(gc_thresholds=wrong)


def test_gc_young_every_setting() -> None:
    assert Settings().gc_young_every_s == 0.05
    assert Settings(gc_young_every_s=0).gc_young_every_s == 0  # off: the interpreter's only
    with pytest.raises(ValidationError, match="gc_young_every_s|PRESSLOOP_GC_YOUNG_EVERY"):
        Settings(gc_young_every_s=-1)


def test_the_middle_generation_is_due_as_the_interpreter_would_choose_it() -> None:
    serve = collector.SERVE_THRESHOLDS
    assert collector.due_generation((0, serve[1], 0), serve) == 0
    assert collector.due_generation((5, serve[1] + 1, 0), serve) == 1
    # Never a full one, however many middle collections ran: that rule stays the interpreter's.
    assert collector.due_generation((0, serve[1] + 1, serve[2] + 1), serve) == 1


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_young_collection_is_made_only_when_none_ran_for_the_interval() -> None:
    clock, collected = FakeClock(), []
    young = collector.YoungCollections(0.05, clock=clock, collect=collected.append)

    clock.now += 0.04
    assert not young.tick() and collected == []  # not due yet
    clock.now += 0.01
    assert young.tick() and len(collected) == 1  # due: one collection...
    assert not young.tick() and len(collected) == 1  # ...and the interval starts again

    clock.now += 0.04
    young.collected()  # the interpreter collected meanwhile (as `watch` tells it)
    clock.now += 0.04
    assert not young.tick() and len(collected) == 1  # 0.04 s after that one: not due
    clock.now += 0.01
    assert young.tick() and len(collected) == 2


def test_young_collections_run_on_the_loop_until_stopped() -> None:
    seen: list[tuple[int, float]] = []

    async def scenario() -> tuple[int, int]:
        unwatch = collector.watch(lambda generation, s: seen.append((generation, s)))
        try:
            gc.disable()  # only the timer collects: none is due by allocations meanwhile
            stop = collector.collect_young_every(0.01)
            await asyncio.sleep(0.2)
            stop()
            made = len(seen)
            await asyncio.sleep(0.1)
            return made, len(seen)
        finally:
            gc.enable()
            unwatch()

    callbacks = len(gc.callbacks)
    made, later = asyncio.run(scenario())
    assert made >= 3  # about 20 in 0.2 s; a busy machine's timers may run late
    assert all(generation < 2 for generation, _ in seen)  # never a full collection
    assert later == made  # stopped: no more
    assert len(gc.callbacks) == callbacks  # and no longer watching


def test_no_young_collections_when_turned_off() -> None:
    callbacks = len(gc.callbacks)

    async def scenario() -> None:
        stop = collector.collect_young_every(0)
        assert len(gc.callbacks) == callbacks  # nothing watches, no timer
        stop()

    asyncio.run(scenario())


LOADED = """
import json, sys
from pressloop.config import Settings
from pressloop.providers.factory import load_sdk
before = {"openai" in sys.modules, "anthropic" in sys.modules}
load_sdk(Settings())
print(json.dumps({"before": sorted(before), "openai": "openai" in sys.modules,
                  "anthropic": "anthropic" in sys.modules}))
"""


def sdks_loaded(**settings: str) -> dict[str, object]:
    """What `load_sdk` imports in a fresh interpreter configured with `settings`."""
    env = isolated_env(**settings)
    done = subprocess.run(
        [sys.executable, "-c", LOADED], env=env, cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    loaded: dict[str, object] = json.loads(done.stdout)
    assert loaded["before"] == [False]  # neither SDK was imported by the settings alone
    return loaded


@pytest.mark.parametrize(
    ("settings", "openai", "anthropic"),
    [
        ({"PRESSLOOP_PROVIDER": "openai-compatible", "PRESSLOOP_BASE_URL": "http://x/v1"}, 1, 0),
        ({"PRESSLOOP_PROVIDER": "anthropic", "ANTHROPIC_API_KEY": "sk-test"}, 0, 1),
        ({"OPENAI_API_KEY": "sk-test"}, 1, 0),  # detected from the key
        ({"PRESSLOOP_PROVIDER": "scripted"}, 0, 0),
        ({}, 0, 0),  # not configured: nothing loaded, no error (each turn reports it)
    ],
)
def test_load_sdk_imports_only_the_configured_providers_sdk(
    settings: dict[str, str], openai: int, anthropic: int
) -> None:
    loaded = sdks_loaded(**settings)
    assert (loaded["openai"], loaded["anthropic"]) == (bool(openai), bool(anthropic))

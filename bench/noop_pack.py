"""An action pack for `bench/background.py` (PRESSLOOP_ACTION_PACKS=noop_pack): one no-op `read`
action named `noop`.

A bench-only hook, off unless the benchmark sets their variable in the worker's
environment (importing the pack alone changes nothing):

PRESSLOOP_BENCH_STATS=PATH
    A monitor thread appends one JSON line to PATH every 100 ms: the event-loop lag (how late
    callbacks scheduled every 20 ms from the thread ran) and cumulative counters from SQLAlchemy
    events: connections checked out (and their peak), connections opened, time spent getting a
    connection from the pool (waiting for one, opening one, the pre-ping), transactions begun
    and SQL statements by verb and table. The listeners cost a few microseconds a statement; on
    this benchmark that is below the run-to-run noise (`bench/background.py --no-stats` runs
    without them).

PRESSLOOP_BENCH_NOOP_CPU_MS=X
    Each `noop` spends X ms of the loop thread's CPU before it answers, in slices of 0.1 ms with
    the loop served between them (round work is made of short callbacks, and a token goes ahead
    of them): more CPU a turn at an unchanged shape, to measure how the first frame's tail
    moves with the serving processes' CPU a turn (docs/benchmarks.md, section 3u).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import threading
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from pressloop.actions.registry import ActionResult, ActionServices, ActionSpec
from pressloop.contracts import ActionContext, Risk


class NoopParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    note: str | None = None


_EXTRA_CPU_S = float(os.environ.get("PRESSLOOP_BENCH_NOOP_CPU_MS", "0")) / 1000
_CPU_SLICE_S = 0.0001


async def noop(
    params: NoopParams, context: ActionContext, services: ActionServices
) -> ActionResult:
    if _EXTRA_CPU_S > 0:
        await _spend_cpu(_EXTRA_CPU_S)
    return ActionResult(content="ok", summary="ok")


async def _spend_cpu(seconds: float) -> None:
    # The thread's clock counts every task on the loop: each call adds up its own slices, or
    # noops running side by side would share one spend between them.
    spent = 0.0
    while spent < seconds:
        start = time.thread_time()
        slice_end = start + min(_CPU_SLICE_S, seconds - spent)
        while time.thread_time() < slice_end:
            pass
        spent += time.thread_time() - start
        await asyncio.sleep(0)


ACTIONS = [
    ActionSpec(
        name="noop",
        description="Does nothing and answers ok.",
        params=NoopParams,
        risk=Risk.READ,
        handler=noop,
    ),
]


# Bench hook: event-loop lag and pool statistics --------------------------------------------------


class _Counters:
    """Pool and SQL counters, updated from SQLAlchemy events (in greenlets of the loop's
    thread) and read by the monitor thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.checked_out = 0
        self.peak = 0
        self.checkouts = 0
        self.connects = 0
        self.get_s = 0.0  # time spent getting a connection: waiting, opening, pinging
        self.get_max_s = 0.0
        self.transactions = 0
        self.statements: dict[str, int] = {}

    def on_connect(self, *_args: Any) -> None:
        with self.lock:
            self.connects += 1

    def on_checkout(self, *_args: Any) -> None:
        with self.lock:
            self.checkouts += 1
            self.checked_out += 1
            self.peak = max(self.peak, self.checked_out)

    def on_checkin(self, *_args: Any) -> None:
        with self.lock:
            self.checked_out -= 1

    def on_get(self, seconds: float) -> None:
        with self.lock:
            self.get_s += seconds
            self.get_max_s = max(self.get_max_s, seconds)

    def on_begin(self, *_args: Any) -> None:
        with self.lock:
            self.transactions += 1

    def on_execute(self, _conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        kind = _statement_kind(statement)
        with self.lock:
            self.statements[kind] = self.statements.get(kind, 0) + 1

    def take(self) -> dict[str, Any]:
        """The counters now (cumulative); the peaks restart from now."""
        with self.lock:
            taken = {
                "checked_out": self.checked_out,
                "peak_checked_out": self.peak,
                "checkouts": self.checkouts,
                "connects": self.connects,
                "get_s": round(self.get_s, 6),
                "get_max_ms": round(self.get_max_s * 1000, 2),
                "transactions": self.transactions,
                "statements": dict(self.statements),
            }
            self.peak = self.checked_out
            self.get_max_s = 0.0
        return taken


_TABLE = re.compile(r"\b(?:FROM|INTO|UPDATE)\s+\"?(\w+)", re.IGNORECASE)


def _statement_kind(statement: str) -> str:
    """'SELECT runs', 'UPDATE runs', 'INSERT run_events', ...: the verb and the first table."""
    text = statement.lstrip()
    verb = text[:6].upper()
    found = _TABLE.search(text)
    return f"{verb} {found.group(1) if found else '-'}"


def _monitor(loop: asyncio.AbstractEventLoop, path: Path, counters: _Counters) -> None:
    """Every 20 ms, schedule a callback on the loop and note how late it ran; every 100 ms,
    append the lags seen and the pool counters to `path`."""
    lags: list[float] = []
    lock = threading.Lock()

    def probe(sent: float) -> None:
        with lock:
            lags.append(time.perf_counter() - sent)

    with path.open("a", encoding="utf-8") as out:
        next_line = time.monotonic() + 0.1
        while not loop.is_closed():
            try:
                loop.call_soon_threadsafe(probe, time.perf_counter())
            except RuntimeError:  # the loop closed
                return
            time.sleep(0.02)
            if time.monotonic() >= next_line:
                next_line += 0.1
                with lock:
                    seen, lags[:] = list(lags), []
                line = {"t": time.time(), "lag_ms": [round(s * 1000, 2) for s in seen]}
                line.update(counters.take())
                out.write(json.dumps(line) + "\n")
                out.flush()


def _install_stats(path: Path) -> None:
    from sqlalchemy import event
    from sqlalchemy.engine import Engine
    from sqlalchemy.pool import Pool

    try:
        loop = asyncio.get_running_loop()  # the worker imports its packs inside its loop
    except RuntimeError:
        return
    counters = _Counters()
    event.listen(Pool, "connect", counters.on_connect)
    event.listen(Pool, "checkout", counters.on_checkout)
    event.listen(Pool, "checkin", counters.on_checkin)
    event.listen(Engine, "begin", counters.on_begin)
    event.listen(Engine, "before_cursor_execute", counters.on_execute)
    connect = Pool.connect

    def timed_connect(self: Pool) -> Any:
        started = time.perf_counter()
        try:
            return connect(self)
        finally:
            counters.on_get(time.perf_counter() - started)

    Pool.connect = timed_connect  # type: ignore[method-assign]
    threading.Thread(
        target=_monitor, args=(loop, path, counters), name="bench-monitor", daemon=True
    ).start()


if os.environ.get("PRESSLOOP_BENCH_STATS"):
    _install_stats(Path(os.environ["PRESSLOOP_BENCH_STATS"]))

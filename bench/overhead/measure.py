"""Measuring: timed turns, each followed by one bare durable commit (the floor)."""

from __future__ import annotations

import argparse
import os
import resource
import sqlite3
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from common import admin_sql, database_url

from overhead.workload import DATABASE_NAMES, MESSAGE, NOOP, ROUNDS, CommitCounter, script
from pressloop.config import Settings
from pressloop.contracts import RunStatus, StepStatus
from pressloop.providers.scripted import ScriptedProvider
from pressloop.runtime.service import Service
from pressloop.store.db import Database


@dataclass(kw_only=True)
class Turn:
    create_thread_s: float
    submit_s: float
    run_s: float
    cpu_s: float  # CPU time of the event-loop thread during submit + run (Python's own work)
    one_round_s: float = 0.0  # a 1-round turn run right after, for the marginal cost of a round

    @property
    def turn_s(self) -> float:
        """Submit -> run finished and persisted (thread creation is not part of a turn)."""
        return self.submit_s + self.run_s


@dataclass(kw_only=True)
class Counts:
    turns: int
    write_commits: float
    read_commits: float
    statements: float
    events: float


@dataclass(kw_only=True)
class Result:
    key: str
    version: str
    turns: list[Turn] = field(default_factory=list)
    commits_s: list[float] = field(default_factory=list)
    counts: Counts | None = None
    peak_rss_mb: float = 0.0
    rss_mb: float = 0.0
    total_wall_s: float = 0.0

    @property
    def name(self) -> str:
        return DATABASE_NAMES[self.key]

    def per_round(self) -> list[float]:
        return [turn.turn_s / ROUNDS for turn in self.turns]

    def ratio(self) -> float:
        return statistics.median(self.per_round()) / statistics.median(self.commits_s)

    def marginal_round_s(self) -> float:
        """What one more round costs: (3-round turn - 1-round turn) / 2, medians. The fixed
        cost of a turn (queue, claim, finish) is left out; it is paid once per turn."""
        three = statistics.median(t.turn_s for t in self.turns)
        one = statistics.median(t.one_round_s for t in self.turns)
        return (three - one) / (ROUNDS - 1)

    def marginal_ratio(self) -> float:
        return self.marginal_round_s() / statistics.median(self.commits_s)

    def fixed_turn_s(self) -> float:
        return statistics.median(t.one_round_s for t in self.turns) - self.marginal_round_s()

    def loop_s(self) -> float:
        """The sequential loop's time: thread creation + turn, summed over the turns."""
        return sum(turn.create_thread_s + turn.turn_s for turn in self.turns)

    def turns_per_s(self) -> float:
        return len(self.turns) / self.loop_s()


SCRATCH = sa.MetaData()
FLOOR_TABLE = sa.Table(
    "bench_commit_floor",
    SCRATCH,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("payload", sa.String(64), nullable=False),
)


class Floor:
    """The bare durable commit: one small INSERT per transaction, through `Database.write()`."""

    def __init__(self, database: Database) -> None:
        self.database = database
        self.count = 0

    async def prepare(self) -> None:
        async with self.database.write() as conn:
            await conn.run_sync(SCRATCH.create_all)

    async def commit(self) -> float:
        self.count += 1
        started = time.perf_counter()
        async with self.database.write() as conn:
            await conn.execute(sa.insert(FLOOR_TABLE), {"payload": f"row {self.count}"})
        return time.perf_counter() - started


class Bench:
    def __init__(self, service: Service, scripted: dict[int, ScriptedProvider]) -> None:
        self.service = service
        self.scripted = scripted  # rounds -> the scripted model for turns of that many rounds
        self.count = 0

    async def new_thread(self) -> tuple[str, float]:
        """One new thread per turn: a fresh chat, so every turn does the same work."""
        self.count += 1
        started = time.perf_counter()
        thread = await self.service.create_thread(title=f"bench {self.count}")
        return thread.id, time.perf_counter() - started

    async def turn(self, thread_id: str, rounds: int = ROUNDS) -> tuple[float, float, float, str]:
        """(submit s, run s, event-loop thread CPU s, run id) of one turn, checked to have run
        its rounds."""
        model = self.scripted[rounds]
        self.service.runner.provider = lambda: model
        cpu = time.thread_time()
        started = time.perf_counter()
        submission = await self.service.submit(thread_id, MESSAGE, user="bench")
        submitted = time.perf_counter()
        run = await self.service.run_now(submission.run.id)
        finished = time.perf_counter()
        cpu = time.thread_time() - cpu
        # Checked outside the timed span: the turn must really have run its 3 rounds.
        if run is None or run.status is not RunStatus.SUCCEEDED or run.result is None:
            raise RuntimeError(f"turn {self.count} did not succeed: {run}")
        steps = run.result.steps
        if len(steps) != rounds or any(s.status is not StepStatus.SUCCEEDED for s in steps):
            raise RuntimeError(f"turn {self.count} ran {steps}, not {rounds} no-op steps")
        # The scripted provider keeps every request; a benchmark must not grow memory with it.
        model.requests.clear()
        return submitted - started, finished - submitted, cpu, run.id

    async def measure(self, count: int, floor: Floor | None) -> tuple[list[Turn], list[float]]:
        """`count` turns in a row; with a floor, one bare commit after each turn (interleaved,
        so that both samples see the same machine: other processes, caches, database size)."""
        turns: list[Turn] = []
        commits: list[float] = []
        for _ in range(count):
            thread_id, create_s = await self.new_thread()
            submit_s, run_s, cpu_s, _run_id = await self.turn(thread_id)
            one_thread, _create_s = await self.new_thread()
            one_submit_s, one_run_s, _cpu, _id = await self.turn(one_thread, rounds=1)
            turns.append(
                Turn(
                    create_thread_s=create_s,
                    submit_s=submit_s,
                    run_s=run_s,
                    cpu_s=cpu_s,
                    one_round_s=one_submit_s + one_run_s,
                )
            )
            if floor is not None:
                commits.append(await floor.commit())
        return turns, commits

    async def counts(self, count: int) -> Counts:
        """Transactions and statements of `count` turns (submit -> finished), counted apart
        from the timed turns so the listeners cost nothing there."""
        engine = self.service.database.engine
        counter = CommitCounter()
        events = 0
        for _ in range(count):
            thread_id, _create_s = await self.new_thread()
            counter.attach(engine)
            try:
                _submit_s, _run_s, _cpu_s, run_id = await self.turn(thread_id)
            finally:
                counter.detach(engine)
            events += len(await self.service.events(run_id))
        return Counts(
            turns=count,
            write_commits=counter.write_commits / count,
            read_commits=counter.read_commits / count,
            statements=counter.statements / count,
            events=events / count,
        )


# Databases ------------------------------------------------------------------------------------


def rss_mb() -> tuple[float, float]:
    """(peak RSS of the process so far, current RSS), in MiB."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return peak, pages * os.sysconf("SC_PAGE_SIZE") / 2**20


async def bench_database(key: str, options: argparse.Namespace) -> Result:
    started = time.perf_counter()
    version = (
        sqlite3.sqlite_version
        if key == "sqlite"
        else await admin_sql(options.postgres_url, "SHOW server_version")
    )
    result = Result(key=key, version=version)
    with tempfile.TemporaryDirectory(prefix="pressloop-bench-") as tmp:
        async with database_url(key, options.postgres_url, Path(tmp)) as url:
            scripted = {n: ScriptedProvider(script(n), cycle=True) for n in (1, ROUNDS)}
            # Budgets and the cooldown would stop a benchmark's thousands of turns a minute.
            settings = Settings(
                data_dir=Path(tmp),
                database_url=url,
                provider="scripted",
                cooldown_s=0,
                budget_user_actions=0,
                budget_user_tokens=0,
                budget_site_actions=0,
                budget_site_tokens=0,
            )
            service = await Service.open(
                settings, provider=lambda: scripted[ROUNDS], actions=[NOOP]
            )
            try:
                bench = Bench(service, scripted)
                floor = Floor(service.database)
                await floor.prepare()
                await bench.measure(options.warmup, floor)
                if options.profile:
                    # Profile the turns alone; the floor is then measured after them.
                    profiler = _start_profiler()
                    result.turns, _none = await bench.measure(options.turns, None)
                    _save_profile(profiler, options.profile)
                    result.commits_s = [await floor.commit() for _ in range(options.turns)]
                else:
                    result.turns, result.commits_s = await bench.measure(options.turns, floor)
                if options.count_turns > 0:
                    result.counts = await bench.counts(options.count_turns)
            finally:
                await service.close()
    result.peak_rss_mb, result.rss_mb = rss_mb()
    result.total_wall_s = time.perf_counter() - started
    return result


def _start_profiler() -> Any:
    from pyinstrument import Profiler  # the `bench` dependency group

    profiler = Profiler(interval=0.0005, async_mode="enabled")
    profiler.start()
    return profiler


def _save_profile(profiler: Any, path: Path) -> None:
    from pyinstrument.renderers import ConsoleRenderer

    profiler.stop()
    tree = profiler.output(ConsoleRenderer(unicode=True, short_mode=False))
    flat = profiler.output(ConsoleRenderer(unicode=True, flat=True, flat_time="self"))
    path.write_text(f"{tree}\n\nFlat, by self time:\n{flat}", encoding="utf-8")
    print(f"profile written to {path}", file=sys.stderr)

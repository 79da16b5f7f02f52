"""Runtime overhead of the agent loop per round, against the floor of one bare durable commit.

A turn is 3 rounds: the scripted model (no latency) answers three times with one call to a no-op
`read` action, then once with the final text. Each turn gets a new thread (the realistic chat
case: a fresh conversation, empty history), is queued with `Service.submit` and run with
`Service.run_now` (the path chat `wait` uses). The model and the action take no time, so the whole
turn is runtime overhead; overhead per round = turn time / 3.

The floor is one transaction that inserts one small row, through the same `Database.write()`, the
same SQLAlchemy async engine and the same settings (SQLite: WAL, synchronous=NORMAL,
BEGIN IMMEDIATE; PostgreSQL: asyncpg, synchronous_commit as the server has it), timed once after
every measured turn so that turns and floor see the same machine.

    python bench/loop_overhead.py                      # both databases, 1,000 turns each
    python bench/loop_overhead.py --write docs/benchmarks.md
    python bench/loop_overhead.py --turns 200 --databases sqlite --profile /tmp/profile.txt
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import resource
import shlex
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import sqlalchemy as sa
from common import admin_sql, database_url, percentile, table, write_section
from pydantic import BaseModel, ConfigDict
from sqlalchemy import event
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from pressloop.actions.registry import ActionResult, ActionServices, ActionSpec
from pressloop.config import Settings
from pressloop.contracts import ActionContext, Risk, RunStatus, StepStatus
from pressloop.providers.scripted import ScriptedProvider
from pressloop.runtime.service import Service
from pressloop.store.db import Database

ROUNDS = 3
GOAL_RATIO = 3.0
MESSAGE = "Run the no-op action three times, then say done."
START_MARKER = "<!-- loop_overhead:start -->"
END_MARKER = "<!-- loop_overhead:end -->"
DEFAULT_POSTGRES = os.environ.get(
    "PRESSLOOP_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test"
)
DATABASE_NAMES = {"sqlite": "SQLite", "postgres": "PostgreSQL"}


# The workload ---------------------------------------------------------------------------------


class NoopParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    note: str | None = None


async def noop(
    params: NoopParams, context: ActionContext, services: ActionServices
) -> ActionResult:
    return ActionResult(content="ok", summary="ok")


NOOP = ActionSpec(
    name="noop",
    description="Does nothing and answers ok.",
    params=NoopParams,
    risk=Risk.READ,
    handler=noop,
)


def script(rounds: int) -> list[dict[str, Any]]:
    return [
        *({"tool_calls": [{"name": "noop", "arguments": {}}]} for _ in range(rounds)),
        {"text": "done"},
    ]


# Counting commits -----------------------------------------------------------------------------


@dataclass(kw_only=True)
class CommitCounter:
    """Counts transactions that wrote, transactions that only read, and statements sent."""

    write_commits: int = 0
    read_commits: int = 0
    statements: int = 0

    def attach(self, engine: AsyncEngine) -> None:
        event.listen(engine.sync_engine, "begin", self._begin)
        event.listen(engine.sync_engine, "before_cursor_execute", self._execute)
        event.listen(engine.sync_engine, "commit", self._commit)

    def detach(self, engine: AsyncEngine) -> None:
        event.remove(engine.sync_engine, "begin", self._begin)
        event.remove(engine.sync_engine, "before_cursor_execute", self._execute)
        event.remove(engine.sync_engine, "commit", self._commit)

    def _begin(self, conn: Connection) -> None:
        conn.info["bench_wrote"] = False

    def _execute(
        self,
        conn: Connection,
        _cursor: Any,
        statement: str,
        _parameters: Any,
        _context: Any,
        _executemany: bool,
    ) -> None:
        verb = statement.lstrip()[:6].upper()
        if verb != "BEGIN ":  # SQLite's explicit BEGIN IMMEDIATE; asyncpg's is implicit
            self.statements += 1
        if verb in ("INSERT", "UPDATE", "DELETE"):
            conn.info["bench_wrote"] = True

    def _commit(self, conn: Connection) -> None:
        if conn.info.get("bench_wrote"):
            self.write_commits += 1
        else:
            self.read_commits += 1


# Measuring ------------------------------------------------------------------------------------


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


# Reporting ------------------------------------------------------------------------------------


def ms(seconds: float) -> str:
    value = seconds * 1000
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def main_table(results: Sequence[Result]) -> str:
    rows = []
    for r in results:
        per_round = r.per_round()
        turn = [t.turn_s for t in r.turns]
        ratio = r.ratio()
        rows.append(
            [
                f"{r.name} {r.version.split()[0]}",
                str(len(r.turns)),
                ms(statistics.median(per_round)),
                ms(percentile(per_round, 95)),
                ms(statistics.median(turn)),
                f"{r.turns_per_s():.1f}",
                ms(statistics.median(r.commits_s)),
                ms(percentile(r.commits_s, 95)),
                f"{ratio:.1f}x",
                ms(r.marginal_round_s()),
                f"{r.marginal_ratio():.1f}x",
                ms(r.fixed_turn_s()),
                "met" if r.marginal_ratio() <= GOAL_RATIO else "missed",
            ]
        )
    return table(
        [
            "database",
            "turns",
            "overhead/round median (ms)",
            "overhead/round p95 (ms)",
            "turn median (ms)",
            "turns/s",
            "bare commit median (ms)",
            "bare commit p95 (ms)",
            "round / commit",
            "marginal round (ms)",
            "marginal round / commit",
            "fixed per turn (ms)",
            f"goal <= {GOAL_RATIO:g}x (marginal)",
        ],
        rows,
    )


def detail_table(results: Sequence[Result]) -> str:
    rows = []
    for r in results:
        counts = r.counts
        rows.append(
            [
                r.name,
                f"{counts.write_commits:.1f}" if counts else "-",
                f"{counts.read_commits:.1f}" if counts else "-",
                f"{counts.statements:.1f}" if counts else "-",
                f"{counts.events:.1f}" if counts else "-",
                ms(statistics.median(t.submit_s for t in r.turns)),
                ms(statistics.median(t.run_s for t in r.turns)),
                ms(statistics.median(t.create_thread_s for t in r.turns)),
                ms(statistics.median(t.cpu_s / ROUNDS for t in r.turns)),
                f"{r.loop_s():.1f}",
                f"{r.peak_rss_mb:.0f} / {r.rss_mb:.0f}",
            ]
        )
    return table(
        [
            "database",
            "write commits/turn",
            "read transactions/turn",
            "SQL statements/turn",
            "events/turn",
            "submit median (ms)",
            "run_now median (ms)",
            "create_thread median (ms)",
            "event-loop CPU/round median (ms)",
            "measured loop (s)",
            "RSS peak / now (MiB)",
        ],
        rows,
    )


def code_version() -> str:
    """The commit measured, and whether pressloop/ had uncommitted changes."""
    root = Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "pressloop"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{commit}{' with uncommitted changes in pressloop/' if dirty else ''}"


def machine_facts(load: tuple[float, float, float], code: str) -> list[str]:
    cpu = "unknown"
    with open("/proc/cpuinfo", encoding="utf-8") as info:
        for line in info:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return [
        f"code: {code} (at the start of the run)",
        f"CPU: {cpu}, nproc {len(os.sched_getaffinity(0))}",
        f"Python {platform.python_version()} ({platform.python_implementation()}), "
        f"{platform.system()} {platform.release()}",
        f"SQLite {sqlite3.sqlite_version} (aiosqlite), SQLAlchemy {sa.__version__}, "
        f"asyncpg {asyncpg.__version__}",
        "load average before the run (1, 5, 15 min): " + ", ".join(f"{v:.2f}" for v in load),
    ]


def report(
    results: Sequence[Result],
    options: argparse.Namespace,
    command: str,
    load: tuple[float, float, float],
    code: str,
) -> str:
    facts = machine_facts(load, code)
    for r in results:
        if r.key == "postgres":
            facts.append(f"PostgreSQL {r.version} (local, 127.0.0.1)")
    missed = [r.name for r in results if r.marginal_ratio() > GOAL_RATIO]
    verdict = (
        f"Goal: overhead per round <= {GOAL_RATIO:g}x one bare commit, counting what a round "
        "adds (marginal); the fixed cost of a turn is shown beside it. "
        + (f"**Missed** on {', '.join(missed)}." if missed else "**Met** on every database.")
    )
    counted = results[0].counts.turns if results and results[0].counts else 0
    lines = [
        "## Loop overhead",
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC with `{command}`.",
        "",
        *(f"- {fact}" for fact in facts),
        "",
        f"Each turn is {ROUNDS} rounds (the scripted model, without latency, calls a no-op "
        "`read` action) and a final answer: 4 model calls, 3 actions. Every turn runs in a new "
        "thread (a fresh chat: empty history), is queued with `Service.submit` and run with "
        "`Service.run_now`; its time runs from submit to the run finished and persisted "
        f"(thread creation is timed apart). Overhead per round = turn time / {ROUNDS}; after "
        "each measured turn a 1-round turn runs too, and the marginal cost of a round is "
        f"(3-round turn - 1-round turn) / {ROUNDS - 1} (medians): what a round adds once the "
        "turn's fixed cost (queue, claim, finish) is paid. "
        f"{options.warmup} warm-up turns first, then {options.turns} measured turns, "
        "sequentially. turns/s counts the sequential loop, thread creation included.",
        "",
        "The bare commit (the floor) is one transaction inserting one small row through the "
        "same `Database.write()` and engine, timed once after every measured turn (interleaved, "
        "so both samples see the same machine load and database size). SQLite: WAL, "
        "synchronous=NORMAL, BEGIN IMMEDIATE, a file in a temp directory. PostgreSQL: asyncpg, "
        "a fresh database, the server's defaults (synchronous_commit on).",
        "",
        main_table(results),
        "",
        verdict + (" (Profiled run: the profiler inflates every time.)" if options.profile else ""),
        "",
        f"Where a turn goes (commits and statements counted over {counted} more turns with "
        "SQLAlchemy event listeners, not during the timed turns):",
        "",
        detail_table(results),
        "",
    ]
    return "\n".join(lines)


# Command line ---------------------------------------------------------------------------------


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=1000, help="measured turns per database")
    parser.add_argument("--warmup", type=int, default=20, help="warm-up turns (and commits)")
    parser.add_argument(
        "--count-turns", type=int, default=50, help="extra turns to count commits on"
    )
    parser.add_argument("--databases", default="sqlite,postgres", help="sqlite,postgres")
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES, help="an admin connection")
    parser.add_argument("--write", type=Path, help="replace this section of a Markdown file")
    parser.add_argument("--profile", type=Path, help="pyinstrument text profile of the turns")
    options = parser.parse_args(argv)
    options.databases = [name.strip() for name in options.databases.split(",") if name.strip()]
    unknown = set(options.databases) - set(DATABASE_NAMES)
    if unknown:
        parser.error(f"unknown databases: {', '.join(sorted(unknown))}")
    if options.profile and options.write:
        parser.error("a profiled run is slower: do not --write its numbers")
    return options


async def run(options: argparse.Namespace) -> list[Result]:
    results: list[Result] = []
    for key in options.databases:
        result = await bench_database(key, options)
        print(
            f"{result.name}: {len(result.turns)} turns in {result.loop_s():.1f} s "
            f"({result.total_wall_s:.1f} s with setup, floor and counting); "
            f"peak RSS {result.peak_rss_mb:.0f} MiB, now {result.rss_mb:.0f} MiB",
            file=sys.stderr,
        )
        results.append(result)
    return results


def main(argv: Sequence[str] | None = None) -> None:
    options = parse(sys.argv[1:] if argv is None else argv)
    command = "python " + shlex.join(sys.argv)
    load = os.getloadavg()
    code = code_version()
    results = asyncio.run(run(options))
    section = report(results, options, command, load, code)
    print(section)
    if options.write is not None:
        write_section(options.write, section, start=START_MARKER, end=END_MARKER)
        print(f"wrote {options.write}", file=sys.stderr)


if __name__ == "__main__":
    main()

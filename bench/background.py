"""Background runs through real worker processes: throughput, and many slow model calls at once.

Throughput: for 1, 2 and 4 `pressloop worker` processes on PostgreSQL (at each `--concurrency`,
default 32 and 8 per process) and one on SQLite, N runs (each 2 rounds: the scripted model,
without latency, calls a no-op `read` action, then answers) are queued straight into a fresh
database with `not_before = T0`, so every worker sees all of them become due at the same instant;
runs/s = N / (T0 -> the last run's `finished_at`).

Slow model: one worker process with `--concurrency 500` and 500 runs whose every model call takes
1 s (2 calls a run: the ideal wall time is 2 s), repeated 3 times: the wall time against the
ideal, the peak of runs `running` at once (the runs table sampled every 100 ms) and the worker's
peak RSS (VmHWM).

The workers are started first and waited for ("started" in their log), so their start-up is not
measured. They are stopped with SIGTERM at the end (SIGKILL after 15 s). Inside them the action
pack `bench/noop_pack.py` answers the script per run and reports event-loop lag and SQLAlchemy
counters (see its docstring).

    python bench/background.py                          # everything, about 4 minutes
    python bench/background.py --write docs/benchmarks.md
    python bench/background.py --databases postgres --workers 1 --runs 300 --slow-runs 0
    python bench/background.py --databases postgres --workers 1 --profile /tmp/profiles
    python bench/background.py --runs 0 --shared-script  # the stock scripted provider
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import os
import platform
import re
import resource
import shlex
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import sqlalchemy as sa
from common import admin_sql, database_url, percentile, table, write_section
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from pressloop.config import Settings
from pressloop.contracts import FINAL_RUN_STATUSES, RunStatus, Trigger
from pressloop.policy import resolve_policy
from pressloop.providers.scripted import ScriptedProvider
from pressloop.runtime.service import Service
from pressloop.store import agents as agent_store
from pressloop.store import runs as run_store
from pressloop.store import threads as thread_store
from pressloop.store.db import Database, normalise_url
from pressloop.store.schema import runs

ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = Path(__file__).resolve().parent
ROUNDS = 2  # model calls per run: a noop tool call, then the final text
SLOW_DELAY_S = 1.0
IDEAL_SLOW_S = ROUNDS * SLOW_DELAY_S
GOAL_RATIO = 1.5
GOAL_RSS_MB = 500.0  # megabytes (10^6 bytes)
SAMPLE_S = 0.1
STOP_GRACE_S = 15.0
MESSAGE = "Call the noop action once, then say done."
START_MARKER = "<!-- background:start -->"
END_MARKER = "<!-- background:end -->"
DEFAULT_POSTGRES = os.environ.get(
    "PRESSLOOP_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test"
)
DATABASE_NAMES = {"sqlite": "SQLite", "postgres": "PostgreSQL"}
CLOCK_TICK_S = 1 / os.sysconf("SC_CLK_TCK")
EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Lost|Exceeded)\b.*")


def script(delay_s: float, *, per_turn: bool = True) -> dict[str, Any]:
    """A noop tool call, then the final text (each after `delay_s`). Per turn, every run gets
    the script from its start; shared, one position cycles through the whole process."""
    delay = {"delay_s": delay_s} if delay_s else {}
    return {
        "per_turn": per_turn,
        "cycle": True,
        "answers": [
            {"tool_calls": [{"name": "noop", "arguments": {}}], **delay},
            {"text": "done", **delay},
        ],
    }


# Cases and outcomes -----------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Case:
    key: str  # "sqlite" | "postgres"
    workers: int
    concurrency: int
    runs: int
    threads: int  # conversation threads the runs are spread over
    slow: bool

    @property
    def label(self) -> str:
        kind = "slow" if self.slow else "throughput"
        return f"{self.key}-{kind}-x{self.workers}-c{self.concurrency}"


@dataclass(kw_only=True)
class Sample:
    t: float  # seconds after T0
    running: int
    final: int
    connections: int | None = None  # to this database
    server_connections: int | None = None  # client connections to the whole server
    lock_waits: int | None = None
    waiting: dict[str, int] = field(default_factory=dict)  # statement -> sessions waiting


@dataclass(kw_only=True)
class WorkerStats:
    """What the bench hook in noop_pack.py wrote from inside one worker, over the window."""

    lags_ms: list[float] = field(default_factory=list)
    pool_peak: int = 0
    connects: int = 0
    checkouts: int = 0
    get_s: float = 0.0  # time spent getting connections from the pool (waits, opens, pings)
    get_max_ms: float = 0.0
    transactions: int = 0
    statements: dict[str, int] = field(default_factory=dict)

    def add(self, other: WorkerStats) -> None:
        self.lags_ms += other.lags_ms
        self.pool_peak = max(self.pool_peak, other.pool_peak)
        self.connects += other.connects
        self.checkouts += other.checkouts
        self.get_s += other.get_s
        self.get_max_ms = max(self.get_max_ms, other.get_max_ms)
        self.transactions += other.transactions
        for kind, count in other.statements.items():
            self.statements[kind] = self.statements.get(kind, 0) + count


@dataclass(kw_only=True)
class Outcome:
    case: Case
    version: str
    insert_s: float = 0.0
    lead_s: float = 0.0
    statuses: dict[str, int] = field(default_factory=dict)
    wrong_rounds: int = 0  # runs that did not make exactly ROUNDS model calls
    retried: int = 0  # runs that needed more than one attempt
    log_errors: dict[str, int] = field(default_factory=dict)  # error lines in worker logs
    starts: list[float] = field(default_factory=list)  # started_at - T0, per run
    finishes: list[float] = field(default_factory=list)  # finished_at - T0, per run
    durations: list[float] = field(default_factory=list)  # finished_at - started_at
    samples: list[Sample] = field(default_factory=list)
    worker_cpu_s: float = 0.0
    postgres_cpu_s: float | None = None
    machine_busy: float = 0.0  # share of all CPUs busy between T0 and the last finish
    bench_cpu_s: float = 0.0  # this process (sampling the tables)
    other_cpu_s: float = 0.0  # everything else the machine did meanwhile
    peak_rss_mb: list[float] = field(default_factory=list)  # VmHWM per worker
    rss_mb: list[float] = field(default_factory=list)  # VmRSS per worker, at the end
    stats: WorkerStats = field(default_factory=WorkerStats)
    stop_s: list[float] = field(default_factory=list)
    exit_codes: list[int | None] = field(default_factory=list)
    timed_out: bool = False
    trials: list[Outcome] = field(default_factory=list)  # every repeat (the slow case)
    idle_before: float = 0.0  # share of the machine busy in the second before the case

    @property
    def name(self) -> str:
        return DATABASE_NAMES[self.case.key]

    @property
    def succeeded(self) -> int:
        return self.statuses.get(RunStatus.SUCCEEDED.value, 0)

    @property
    def wall_s(self) -> float:
        return max(self.finishes) if self.finishes else float("nan")

    @property
    def runs_per_s(self) -> float:
        return len(self.finishes) / self.wall_s if self.finishes else 0.0

    @property
    def peak_running(self) -> int:
        return max((s.running for s in self.samples), default=0)

    def peak(self, name: str) -> int | None:
        values = [getattr(s, name) for s in self.samples if getattr(s, name) is not None]
        return max(values) if values else None

    @property
    def peak_mb(self) -> float:
        """The highest worker VmHWM, over every repeat."""
        return max(
            (mb for o in self.trials or [self] for mb in o.peak_rss_mb), default=float("nan")
        )

    @property
    def all_good(self) -> bool:
        return (
            self.succeeded == self.case.runs
            and self.wrong_rounds == 0
            and self.retried == 0
            and not self.timed_out
            and all(code == 0 for code in self.exit_codes)
        )


# Machine and process counters -----------------------------------------------------------------


def process_cpu_s(pid: int, *, children: bool = False) -> float:
    """utime + stime of a process (all its threads); with `children`, also its reaped
    children's."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = text.rsplit(")", 1)[1].split()
    # fields[0] is the state (field 3); utime, stime, cutime, cstime are fields 14-17.
    ticks = int(fields[11]) + int(fields[12])
    if children:
        ticks += int(fields[13]) + int(fields[14])
    return ticks * CLOCK_TICK_S


def child_pids(parent: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue
        if int(text.rsplit(")", 1)[1].split()[1]) == parent:
            found.append(int(entry.name))
    return found


def tree_cpu_s(root: int | None) -> float | None:
    """CPU of a server and all its children, living or gone (the PostgreSQL postmaster reaps its
    backends, so their CPU lands in its cutime/cstime)."""
    if root is None:
        return None
    return process_cpu_s(root, children=True) + sum(process_cpu_s(p) for p in child_pids(root))


def machine_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs since boot."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    total = sum(values[:8])  # user..steal (guest time is already counted in user)
    return total - idle, total


def own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def memory_mb(pid: int) -> tuple[float, float]:
    """(VmHWM, VmRSS) of a process in MB (10^6 bytes)."""
    peak = now = 0.0
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                peak = int(line.split()[1]) * 1024 / 1e6
            elif line.startswith("VmRSS:"):
                now = int(line.split()[1]) * 1024 / 1e6
    return peak, now


async def machine_busy_over(seconds: float) -> float:
    busy_before, total_before = machine_ticks()
    await asyncio.sleep(seconds)
    busy_after, total_after = machine_ticks()
    return (busy_after - busy_before) / max(1, total_after - total_before)


async def wait_for_quiet(limit_s: float, threshold: float = 0.2) -> float:
    """Wait (up to `limit_s`) until other work leaves the machine nearly idle for a second: this
    benchmark saturates both cores, so anything else running skews it. Returns the share of the
    machine busy in the last second measured."""
    deadline = time.monotonic() + limit_s
    while True:
        busy = await machine_busy_over(1.0)
        if busy < threshold or time.monotonic() >= deadline:
            return busy
        await asyncio.sleep(2.0)


# Databases --------------------------------------------------------------------------------------


def _postmaster_in(data_dir: str) -> int | None:
    try:
        pid = int((Path(data_dir) / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pid if Path(f"/proc/{pid}").exists() else None


async def postmaster_pid(admin_url: str) -> int | None:
    """The local PostgreSQL server's pid (to count its CPU), if this machine can see it."""
    try:
        data_dir = await admin_sql(admin_url, "SHOW data_directory")
    except asyncpg.PostgresError:
        return None
    return _postmaster_in(data_dir)


@dataclass(kw_only=True)
class ConnectionCost:
    """What one transaction costs with a new connection each time versus a pooled one."""

    new_wall_ms: float
    new_client_ms: float
    new_server_ms: float
    pooled_wall_ms: float
    pooled_client_ms: float
    pooled_server_ms: float


async def connection_cost(url: str, postmaster: int | None, count: int = 200) -> ConnectionCost:
    """`SELECT 1` transactions through the same engine settings as pressloop's `Database`
    (asyncpg, pre-ping, the idle-transaction timeout): on a new connection each (NullPool, what
    an overflow connection costs) and on one pooled connection. CPU from /proc."""
    values: list[float] = []
    for pool in ("new", "pooled"):
        if pool == "pooled":
            database = Database.open(url)
        else:
            database = Database(
                create_async_engine(
                    normalise_url(url),
                    poolclass=NullPool,
                    connect_args={
                        "server_settings": {"idle_in_transaction_session_timeout": "60000"}
                    },
                )
            )
        try:
            async with database.read() as conn:
                await conn.execute(sa.select(1))
            server = tree_cpu_s(postmaster) or 0.0
            client = own_cpu_s()
            started = time.perf_counter()
            for _ in range(count):
                async with database.read() as conn:
                    await conn.execute(sa.select(1))
            wall = time.perf_counter() - started
            client = own_cpu_s() - client
            server = (tree_cpu_s(postmaster) or 0.0) - server
        finally:
            await database.close()
        values += [wall * 1000 / count, client * 1000 / count, server * 1000 / count]
    return ConnectionCost(
        new_wall_ms=values[0],
        new_client_ms=values[1],
        new_server_ms=values[2],
        pooled_wall_ms=values[3],
        pooled_client_ms=values[4],
        pooled_server_ms=values[5],
    )


# Worker processes -------------------------------------------------------------------------------


class WorkerProcess:
    def __init__(
        self,
        *,
        index: int,
        case: Case,
        url: str,
        tmp: Path,
        script_path: Path,
        poll_s: float,
        stats: bool,
        profile_dir: Path | None,
        profiler: str = "pyinstrument",
    ) -> None:
        self.log_path = tmp / f"{case.label}-worker{index}.log"
        self.stats_path = tmp / f"{case.label}-worker{index}.stats.jsonl"
        env = {
            **os.environ,
            "PRESSLOOP_DATABASE_URL": url,
            "PRESSLOOP_DATA_DIR": str(tmp),
            "PRESSLOOP_PROVIDER": "scripted",
            "PRESSLOOP_SCRIPT": str(script_path),
            "PRESSLOOP_ACTION_PACKS": "noop_pack",
            "PRESSLOOP_WORKER_POLL": str(poll_s),
            # No daily budgets: one case runs far more than a day's default budget of actions.
            "PRESSLOOP_BUDGET_USER_ACTIONS": "0",
            "PRESSLOOP_BUDGET_USER_TOKENS": "0",
            "PRESSLOOP_BUDGET_SITE_ACTIONS": "0",
            "PRESSLOOP_BUDGET_SITE_TOKENS": "0",
            "PYTHONPATH": os.pathsep.join(
                [str(BENCH_DIR), str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
            ),
        }
        if stats:
            env["PRESSLOOP_BENCH_STATS"] = str(self.stats_path)
        command = [sys.executable]
        if profile_dir is not None:
            profile_dir.mkdir(parents=True, exist_ok=True)
            if profiler == "cprofile":  # deterministic: call counts, exact but slower
                out = profile_dir / f"{case.label}-worker{index}.prof"
                command += ["-m", "cProfile", "-o", str(out)]
            else:  # a session file: `pyinstrument --load FILE` renders it any way
                out = profile_dir / f"{case.label}-worker{index}.pyisession"
                command += ["-m", "pyinstrument", "-r", "pyisession", "-o", str(out)]
        command += ["-m", "pressloop.runtime.process", "--concurrency", str(case.concurrency)]
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=tmp
            )
        self.stop_s: float | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    def log_text(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    async def wait_started(self, limit_s: float = 60.0) -> None:
        deadline = time.monotonic() + limit_s
        while " started (concurrency" not in self.log_text():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"worker {self.pid} did not start:\n{self.log_text()[-3000:]}")
            await asyncio.sleep(0.05)

    def errors(self) -> dict[str, int]:
        """ERROR and WARNING log lines, by their message without ids."""
        found: dict[str, int] = {}
        for line in self.log_text().splitlines():
            parts = line.split(" ", 4)
            if len(parts) == 5 and parts[2] in ("ERROR", "WARNING"):
                message = f"{parts[2]} {parts[4]}"
            elif EXCEPTION_LINE.match(line):  # the last line of a traceback
                message = line
            else:
                continue
            message = re.sub(r"\b(run|thr)_\w+", r"\1_…", message)[:140]
            found[message] = found.get(message, 0) + 1
        return found

    def terminate(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)

    async def wait_stopped(self, started: float) -> int | None:
        """The exit code once stopped; None if it had to be killed after the grace period."""
        left = max(0.0, started + STOP_GRACE_S - time.monotonic())
        try:
            code = await asyncio.to_thread(self.process.wait, left)
        except subprocess.TimeoutExpired:
            self.process.kill()
            await asyncio.to_thread(self.process.wait, 10)
            return None
        self.stop_s = time.monotonic() - started
        return code

    def read_stats(self, start: float, end: float) -> WorkerStats:
        """Lags and pool counters from the lines written between `start` and `end` (epoch s)."""
        stats = WorkerStats()
        if not self.stats_path.exists():
            return stats
        lines = [json.loads(line) for line in self.stats_path.read_text().splitlines() if line]
        before = [line for line in lines if line["t"] <= start]
        window = [line for line in lines if start < line["t"] <= end + 0.1]
        if not window:
            return stats
        base: dict[str, Any] = before[-1] if before else {}
        last = window[-1]
        stats.lags_ms = [lag for line in window for lag in line["lag_ms"]]
        stats.pool_peak = max(line["peak_checked_out"] for line in window)
        stats.get_max_ms = max(line["get_max_ms"] for line in window)
        for name in ("connects", "checkouts", "get_s", "transactions"):
            setattr(stats, name, last[name] - base.get(name, 0))
        earlier = base.get("statements", {})
        stats.statements = {
            kind: count - earlier.get(kind, 0)
            for kind, count in last["statements"].items()
            if count > earlier.get(kind, 0)
        }
        return stats


# One case ---------------------------------------------------------------------------------------


class Bench:
    def __init__(self, options: argparse.Namespace, tmp: Path, postmaster: int | None) -> None:
        self.options = options
        self.tmp = tmp
        self.postmaster = postmaster
        self.count = 0

    async def run_case(self, case: Case) -> Outcome:
        version = (
            sqlite3.sqlite_version
            if case.key == "sqlite"
            else await admin_sql(self.options.postgres_url, "SHOW server_version")
        )
        outcome = Outcome(case=case, version=version)
        waited = time.monotonic()
        outcome.idle_before = await wait_for_quiet(self.options.quiet_wait)
        waited = time.monotonic() - waited
        if waited > 3:
            print(
                f"{case.label}: waited {waited:.0f} s for the machine to go idle", file=sys.stderr
            )
        if outcome.idle_before >= 0.2:
            print(
                f"{case.label}: the machine is still {outcome.idle_before:.0%} busy with other "
                "work; measuring anyway",
                file=sys.stderr,
            )
        self.count += 1
        case_dir = self.tmp / f"{self.count:02d}-{case.label}"
        case_dir.mkdir(parents=True)
        async with database_url(case.key, self.options.postgres_url, case_dir) as url:
            settings = Settings(data_dir=case_dir, database_url=url, provider="scripted")
            # Migrates the fresh database before any worker opens it.
            service = await Service.open(settings, provider=lambda: ScriptedProvider([]))
            workers: list[WorkerProcess] = []
            try:
                script_path = case_dir / "script.json"
                script_path.write_text(
                    json.dumps(
                        script(
                            SLOW_DELAY_S if case.slow else 0,
                            per_turn=not self.options.shared_script,
                        )
                    )
                )
                workers = [
                    WorkerProcess(
                        index=i,
                        case=case,
                        url=url,
                        tmp=case_dir,
                        script_path=script_path,
                        poll_s=self.options.poll,
                        stats=not self.options.no_stats,
                        profile_dir=self.options.profile,
                        profiler=self.options.profiler,
                    )
                    for i in range(case.workers)
                ]
                for worker in workers:
                    await worker.wait_started()
                await self.measure(service.database, case, workers, outcome)
            finally:
                stopping = time.monotonic()
                for worker in workers:
                    worker.terminate()
                for worker in workers:
                    outcome.exit_codes.append(await worker.wait_stopped(stopping))
                    if worker.stop_s is not None:
                        outcome.stop_s.append(worker.stop_s)
                await service.close()
            if not outcome.all_good and workers:
                tail = workers[0].log_text()[-1500:]
                print(f"--- {workers[0].log_path.name} (tail)\n{tail}", file=sys.stderr)
        return outcome

    async def populate(self, database: Database, case: Case) -> tuple[datetime, float, float]:
        """Threads, then runs due at T0 (far enough ahead that every insert is done before it):
        (T0, seconds spent inserting, the lead T0 was set ahead by)."""
        started = time.perf_counter()
        now = datetime.now(UTC)
        thread_ids: list[str] = []
        batch = 200
        for first in range(0, case.threads, batch):
            async with database.write() as conn:
                for i in range(first, min(case.threads, first + batch)):
                    thread = await thread_store.create_thread(
                        conn, agent_id=agent_store.DEFAULT_AGENT_ID, now=now, title=f"bench {i}"
                    )
                    thread_ids.append(thread.id)
        threads_s = time.perf_counter() - started
        # Inserting a run costs about what inserting a thread did (an INSERT and a SELECT).
        lead_s = self.options.lead or (1.0 + 2.5 * threads_s * case.runs / case.threads)
        t0 = datetime.now(UTC) + timedelta(seconds=lead_s)
        policy = resolve_policy(Trigger.API)
        for first in range(0, case.runs, batch):
            async with database.write() as conn:
                for i in range(first, min(case.runs, first + batch)):
                    await run_store.create_run(
                        conn,
                        thread_id=thread_ids[i % len(thread_ids)],
                        agent_id=agent_store.DEFAULT_AGENT_ID,
                        trigger=Trigger.API,
                        input=MESSAGE,
                        policy=policy,
                        now=datetime.now(UTC),
                        requesting_user="bench",
                        execution_user="bench",
                        not_before=t0,
                    )
        if datetime.now(UTC) >= t0:
            raise RuntimeError(
                f"inserting {case.runs} runs took longer than the lead of {lead_s:.1f} s; "
                "pass a longer --lead"
            )
        return t0, time.perf_counter() - started, lead_s

    async def sample(self, database: Database, t0: datetime) -> Sample:
        elapsed = (datetime.now(UTC) - t0).total_seconds()
        async with database.read() as conn:
            rows = (
                await conn.execute(
                    sa.select(runs.c.status, sa.func.count()).group_by(runs.c.status)
                )
            ).all()
            counts = {status: int(count) for status, count in rows}
            sample = Sample(
                t=elapsed,
                running=counts.get(RunStatus.RUNNING.value, 0),
                final=sum(counts.get(s.value, 0) for s in FINAL_RUN_STATUSES),
            )
            if database.dialect == "postgresql":
                row = (
                    await conn.execute(
                        sa.text(
                            "SELECT count(*) FILTER (WHERE datname = current_database()), "
                            "count(*), "
                            "count(*) FILTER (WHERE datname = current_database() "
                            "AND wait_event_type = 'Lock') "
                            "FROM pg_stat_activity "
                            "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
                        )
                    )
                ).one()
                sample.connections, sample.server_connections, sample.lock_waits = (
                    int(v) for v in row
                )
                if sample.lock_waits:
                    waiting = await conn.execute(
                        sa.text(
                            "SELECT left(regexp_replace(query, '\\s+', ' ', 'g'), 70), "
                            "count(*) FROM pg_stat_activity "
                            "WHERE datname = current_database() AND wait_event_type = 'Lock' "
                            "GROUP BY 1"
                        )
                    )
                    sample.waiting = {str(q): int(n) for q, n in waiting.all()}
        return sample

    async def measure(
        self, database: Database, case: Case, workers: list[WorkerProcess], outcome: Outcome
    ) -> None:
        t0, outcome.insert_s, outcome.lead_s = await self.populate(database, case)
        # Counters just before T0 (the workers only poll until then).
        await asyncio.sleep(max(0.0, (t0 - datetime.now(UTC)).total_seconds() - 0.05))
        cpu_before = sum(process_cpu_s(w.pid) for w in workers)
        pg_before = tree_cpu_s(self.postmaster) if case.key == "postgres" else None
        busy_before, total_before = machine_ticks()
        bench_before = own_cpu_s()
        t0_epoch = t0.timestamp()
        await asyncio.sleep(max(0.0, t0_epoch - time.time()))
        deadline = time.monotonic() + self.options.timeout
        while True:
            sample = await self.sample(database, t0)
            outcome.samples.append(sample)
            if sample.final >= case.runs:
                break
            if time.monotonic() > deadline or any(w.process.poll() is not None for w in workers):
                outcome.timed_out = True
                break
            await asyncio.sleep(SAMPLE_S)
        end_epoch = time.time()
        busy_after, total_after = machine_ticks()
        outcome.worker_cpu_s = sum(process_cpu_s(w.pid) for w in workers) - cpu_before
        if pg_before is not None:
            pg_after = tree_cpu_s(self.postmaster)
            outcome.postgres_cpu_s = (pg_after or 0.0) - pg_before
        outcome.machine_busy = (busy_after - busy_before) / max(1, total_after - total_before)
        outcome.bench_cpu_s = own_cpu_s() - bench_before
        outcome.other_cpu_s = (
            (busy_after - busy_before) * CLOCK_TICK_S
            - outcome.worker_cpu_s
            - (outcome.postgres_cpu_s or 0.0)
            - outcome.bench_cpu_s
        )
        for worker in workers:
            peak, now = memory_mb(worker.pid)  # VmHWM just before stopping the worker
            outcome.peak_rss_mb.append(peak)
            outcome.rss_mb.append(now)
        await asyncio.sleep(0.15)  # let each monitor write its last line
        for worker in workers:
            outcome.stats.add(worker.read_stats(t0_epoch, end_epoch))
        async with database.read() as conn:
            rows = (
                await conn.execute(
                    sa.select(
                        runs.c.status,
                        runs.c.started_at,
                        runs.c.finished_at,
                        runs.c.usage,
                        runs.c.attempt,
                    )
                )
            ).all()
        for worker in workers:
            for kind, count in worker.errors().items():
                outcome.log_errors[kind] = outcome.log_errors.get(kind, 0) + count
        for status, started_at, finished_at, usage, attempt in rows:
            outcome.statuses[status] = outcome.statuses.get(status, 0) + 1
            outcome.retried += attempt > 1
            if (usage or {}).get("model_calls") != ROUNDS:
                outcome.wrong_rounds += 1
            if started_at is not None:
                outcome.starts.append((started_at - t0).total_seconds())
            if finished_at is not None:
                outcome.finishes.append((finished_at - t0).total_seconds())
                if started_at is not None:
                    outcome.durations.append((finished_at - started_at).total_seconds())


# Reporting --------------------------------------------------------------------------------------


def num(value: float | None, digits: int = 1) -> str:
    if value is None or value != value:  # None or NaN
        return "-"
    return f"{value:.{digits}f}"


def per_run_ms(seconds: float | None, runs: int) -> str:
    return num(seconds * 1000 / runs, 1) if seconds is not None and runs else "-"


def lag_text(stats: WorkerStats) -> str:
    lags = stats.lags_ms
    if not lags:
        return "-"
    return f"{statistics.median(lags):.0f} / {percentile(lags, 99):.0f} / {max(lags):.0f}"


def case_name(o: Outcome) -> str:
    if o.case.slow:
        return f"{o.name}, slow model, concurrency {o.case.concurrency}"
    return f"{o.name} x{o.case.workers}, concurrency {o.case.concurrency}"


def throughput_table(outcomes: Sequence[Outcome]) -> str:
    base: dict[str, float] = {}
    rows = []
    for o in outcomes:
        group = f"{o.case.key}:{o.case.concurrency}"
        if o.case.workers == 1:
            base.setdefault(group, o.runs_per_s)
        one = base.get(group)
        rows.append(
            [
                f"{o.name} {o.version.split()[0]}",
                str(o.case.workers),
                str(o.case.concurrency),
                f"{o.succeeded}/{o.case.runs}" + ("" if o.wrong_rounds == 0 else "*"),
                num(o.wall_s, 2),
                f"**{num(o.runs_per_s, 1)}**",
                f"{o.runs_per_s / one:.2f}x" if one else "-",
                f"{o.machine_busy * 100:.0f}%",
                str(o.peak_running),
                str(o.retried),
                num(o.peak("server_connections"), 0),
            ]
        )
    return table(
        [
            "database",
            "worker processes",
            "concurrency / process",
            "succeeded",
            "T0 -> last finish (s)",
            "runs/s",
            "vs 1 process",
            "machine CPU busy",
            "peak running",
            "runs retried",
            "peak server connections",
        ],
        rows,
    )


def slow_table(outcomes: Sequence[Outcome]) -> str:
    rows = []
    for o in outcomes:
        ratio = o.wall_s / IDEAL_SLOW_S
        walls = sorted(t.wall_s for t in o.trials or [o])
        spread = f" ({', '.join(f'{w:.2f}' for w in walls)})" if len(walls) > 1 else ""
        rows.append(
            [
                f"{o.name} {o.version.split()[0]}",
                str(o.case.workers),
                str(o.case.concurrency),
                f"{o.succeeded}/{o.case.runs}" + ("" if o.wrong_rounds == 0 else "*"),
                num(o.wall_s, 2) + spread,
                f"**{ratio:.2f}x**",
                "met" if ratio <= GOAL_RATIO and o.all_good else "missed",
                str(o.peak_running),
                f"{num(min(o.starts, default=None), 2)} / {num(max(o.starts, default=None), 2)}",
                f"{num(statistics.median(o.durations) if o.durations else None, 2)} / "
                f"{num(percentile(o.durations, 95), 2)}",
                f"**{num(o.peak_mb, 0)}**",
                "met" if o.peak_mb < GOAL_RSS_MB else "missed",
            ]
        )
    return table(
        [
            "database",
            "worker processes",
            "concurrency",
            "succeeded",
            "T0 -> last finish (s): median (each repeat)",
            f"/ ideal {IDEAL_SLOW_S:g} s",
            f"goal <= {GOAL_RATIO:g}x",
            "peak running",
            "first / last run started (s after T0)",
            "run time median / p95 (s)",
            "worker peak RSS (MB)",
            f"goal < {GOAL_RSS_MB:g} MB",
        ],
        rows,
    )


def detail_table(outcomes: Sequence[Outcome]) -> str:
    rows = []
    for o in outcomes:
        n = o.case.runs
        st = o.stats
        rows.append(
            [
                case_name(o),
                per_run_ms(o.worker_cpu_s, n),
                per_run_ms(o.postgres_cpu_s, n),
                f"{num(o.worker_cpu_s, 1)} / {num(o.postgres_cpu_s, 1)} / "
                f"{num(o.bench_cpu_s, 1)} / {num(max(0.0, o.other_cpu_s), 1)}",
                num(st.transactions / n, 1),
                num(sum(st.statements.values()) / n, 1),
                f"{num(st.get_s * 1000 / n, 1)} / {num(st.get_max_ms, 0)}",
                f"{st.pool_peak} / {num(o.peak('connections'), 0)}",
                str(st.connects),
                num(o.peak("lock_waits"), 0),
                lag_text(st),
            ]
        )
    return table(
        [
            "case",
            "worker CPU / run (ms)",
            "PostgreSQL CPU / run (ms)",
            "CPU s: workers / PostgreSQL / bench / rest of machine",
            "transactions / run",
            "SQL statements / run",
            "getting a pooled connection: ms / run, max ms",
            "pool peak checked out / peak DB connections",
            "connections opened",
            "peak sessions waiting on a lock",
            "event-loop lag p50 / p99 / max (ms)",
        ],
        rows,
    )


def lock_waits(o: Outcome) -> str:
    total: dict[str, int] = {}
    for sample in o.samples:
        for statement, count in sample.waiting.items():
            total[statement] = total.get(statement, 0) + count
    parts = sorted(total.items(), key=lambda item: -item[1])[:3]
    return "; ".join(f"{count} x `{statement}`" for statement, count in parts)


def statements_breakdown(o: Outcome) -> str:
    n = o.case.runs
    parts = sorted(o.stats.statements.items(), key=lambda item: -item[1])
    return ", ".join(f"{kind} {count / n:.2f}" for kind, count in parts)


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout


def code_version() -> str:
    """The commit measured and, if pressloop/ has uncommitted changes, a digest of them (so a
    change made while the benchmark runs shows)."""
    try:
        commit = _git("rev-parse", "--short", "HEAD").strip()
        status = _git("status", "--porcelain", "--", "pressloop")
        if not status.strip():
            return commit
        digest = hashlib.sha1(status.encode())
        digest.update(_git("diff", "HEAD", "--", "pressloop").encode())
        for line in status.splitlines():
            path = ROOT / line[3:]
            if line.startswith("??") and path.is_file():
                digest.update(path.read_bytes())
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{commit} with uncommitted changes in pressloop/ (digest {digest.hexdigest()[:8]})"


def machine_facts(load: tuple[float, float, float], code: str, code_after: str) -> list[str]:
    cpu = "unknown"
    with open("/proc/cpuinfo", encoding="utf-8") as info:
        for line in info:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    memory_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9
    return [
        f"code: {code} (at the start of the run)"
        + ("" if code_after == code else f"; **changed during the run**, to {code_after}"),
        f"CPU: {cpu}, nproc {len(os.sched_getaffinity(0))}; memory {memory_gb:.0f} GB",
        f"Python {platform.python_version()} ({platform.python_implementation()}), "
        f"{platform.system()} {platform.release()}",
        f"SQLite {sqlite3.sqlite_version} (aiosqlite), SQLAlchemy {sa.__version__}, "
        f"asyncpg {asyncpg.__version__}",
        "load average before the run (1, 5, 15 min): " + ", ".join(f"{v:.2f}" for v in load),
    ]


def processes(count: int) -> str:
    return "one worker process" if count == 1 else f"{count} worker processes"


def verdicts(throughput: Sequence[Outcome], slow: Sequence[Outcome]) -> list[str]:
    lines = []
    for o in slow:
        ratio = o.wall_s / IDEAL_SLOW_S
        peak_mb = o.peak_mb
        time_ok = ratio <= GOAL_RATIO and o.all_good
        lines.append(
            f"- {o.name}, {o.case.runs} runs of 1 s model calls in "
            f"{processes(o.case.workers)}: wall time "
            f"{o.wall_s:.2f} s = {ratio:.2f}x the ideal {IDEAL_SLOW_S:g} s, "
            f"**{'met' if time_ok else 'missed'}** (goal <= {GOAL_RATIO:g}x); peak RSS "
            f"{peak_mb:.0f} MB, **{'met' if peak_mb < GOAL_RSS_MB else 'missed'}** "
            f"(goal < {GOAL_RSS_MB:g} MB); at most {o.peak_running} runs running at once."
        )
    for concurrency in dict.fromkeys(o.case.concurrency for o in throughput):
        pg = [
            o for o in throughput if o.case.key == "postgres" and o.case.concurrency == concurrency
        ]
        if len(pg) < 2:
            continue
        rates = ", ".join(f"x{o.case.workers}: {o.runs_per_s:.1f}" for o in pg)
        grows = all(b.runs_per_s > a.runs_per_s * 1.05 for a, b in zip(pg, pg[1:], strict=False))
        troubles = [
            f"x{o.case.workers}: {o.retried} runs retried"
            for o in pg
            if o.retried or not o.all_good
        ]
        lines.append(
            f"- PostgreSQL throughput, concurrency {concurrency} per process, by worker "
            f"processes (runs/s): {rates}; "
            + ("it grows with every process added" if grows else "it does **not** keep growing")
            + (f" ({'; '.join(troubles)})." if troubles else ".")
        )
    return lines


def findings(
    throughput: Sequence[Outcome], slow: Sequence[Outcome], options: argparse.Namespace
) -> list[str]:
    """What the numbers above say about the limits, in sentences built from the measurements."""
    lines: list[str] = []
    pg = [o for o in [*throughput, *slow] if o.case.key == "postgres"]
    for o in pg:
        if o.log_errors:
            refused = sum(
                n
                for m, n in o.log_errors.items()
                if m.startswith("asyncpg.exceptions.TooManyConnectionsError")
                or (m.startswith("WARNING") and "too many clients" in m)
            )
            if refused:
                lines.append(
                    f"- {case_name(o)}: the workers logged {refused} refused connections "
                    f"(`too many clients`, max_connections {options.pg_max}; up to "
                    f"{num(o.peak('server_connections'), 0)} client connections were open). "
                    "A run whose session could not write stays `running` under its lease until "
                    f"the lease expires (30 s) and another worker resumes it: {o.retried} runs "
                    "needed a second attempt."
                )
    cost = options.connection_cost
    churn = [o for o in pg if o.stats.connects]
    if cost is not None and churn:
        worst = max(churn, key=lambda o: o.stats.connects / o.case.runs)
        lines.append(
            f"- Connection churn: {case_name(worst)} opened {worst.stats.connects} connections "
            f"for {worst.case.runs} runs. The pool keeps 10 connections and closes every "
            "overflow connection it gets back while 10 are idle, so a worker with more than 10 "
            "connections busy keeps opening new ones. Measured here, a transaction on a new "
            f"connection costs {cost.new_wall_ms:.1f} ms ({cost.new_client_ms:.1f} ms of the "
            f"client's CPU, {cost.new_server_ms:.1f} ms of PostgreSQL's), on a pooled one "
            f"{cost.pooled_wall_ms:.2f} ms ({cost.pooled_client_ms:.2f} ms, "
            f"{cost.pooled_server_ms:.2f} ms, the pre-ping included)."
        )
    waits = [o for o in pg if any(s.lock_waits for s in o.samples)]
    if waits:
        worst = max(waits, key=lambda o: statistics.mean(s.lock_waits or 0 for s in o.samples))
        mean = statistics.mean(s.lock_waits or 0 for s in worst.samples)
        lines.append(
            f"- Row locks: in {case_name(worst)}, {mean:.1f} sessions were waiting on a lock on "
            f"average (peak {num(worst.peak('lock_waits'), 0)}); the statements they waited in, "
            f"summed over the samples: {lock_waits(worst)}."
        )
    for o in slow:
        cpu = o.worker_cpu_s / max(1, o.case.workers)
        lines.append(
            f"- {case_name(o)}: each worker process used {cpu:.1f} s of CPU in a "
            f"{o.wall_s:.2f} s window ({o.worker_cpu_s * 1000 / o.case.runs:.1f} ms a run); "
            f"the last run started {max(o.starts, default=0):.2f} s after T0, and a run spent "
            f"{o.stats.get_s * 1000 / o.case.runs:.0f} ms on average getting pooled "
            f"connections (pool peak {o.stats.pool_peak})."
        )
    return lines


def report(
    throughput: Sequence[Outcome],
    slow: Sequence[Outcome],
    options: argparse.Namespace,
    command: str,
    load: tuple[float, float, float],
    code: str,
    code_after: str,
) -> str:
    facts = machine_facts(load, code, code_after)
    for o in [*throughput, *slow]:
        if o.case.key == "postgres":
            facts.append(
                f"PostgreSQL {o.version} (local, 127.0.0.1, same machine; max_connections "
                f"{options.pg_max}, the server's defaults)"
            )
            break
    cores = len(os.sched_getaffinity(0))
    threads = options.threads or options.runs
    slow_concurrency = options.slow_concurrency or -(-options.slow_runs // options.slow_workers)
    lines = [
        "## Background runs: throughput and slow models",
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC with `{command}`.",
        "",
        *(f"- {fact}" for fact in facts),
        "",
        "Real `pressloop worker` processes (`python -m pressloop.runtime.process --concurrency "
        'N`), started and waited for ("started" in their log) before anything is measured, '
        f"polling every {options.poll:g} s (`PRESSLOOP_WORKER_POLL`; the default is 0.5 s), "
        "with the `noop_pack` action pack (`bench/noop_pack.py`) and no daily budgets "
        "(`PRESSLOOP_BUDGET_*=0`: a case runs more actions than a day's default budget; the "
        "budget query still runs). Each run is 2 rounds: the "
        "scripted model (a cycle script) calls a no-op `read` action, then answers with text. "
        "Every case gets a fresh database (PostgreSQL: a new database on the local server; "
        "SQLite: a new file, WAL), migrated before the workers start. The bench then inserts "
        "the runs itself (`runs.create_run`, "
        + (
            "one thread per run"
            if threads >= options.runs
            else f"{threads} threads, so runs of one thread wait for each other"
        )
        + ") with `not_before = T0`, T0 far enough ahead that every insert is done, so all "
        "workers see every run become due at once. Times run from T0 to the runs' "
        "`finished_at` (stamped by the worker just before its final commit; same clock). "
        "The bench samples the runs table and `pg_stat_activity` every 100 ms, and waits "
        "before each case until the machine is idle (other work on it skews everything; the "
        "last table shows the CPU the rest of the machine used anyway).",
        "",
        "The scripted provider keeps one script position per process, so with many runs in "
        "flight the answers of the cycle script interleave across runs (a run gets the text "
        "first, or several tool calls in a row: with 500 slow runs started at once, most runs "
        "make other than 2 model calls, a few fail at `max_rounds`, and the wall time is "
        "several times longer). "
        + (
            'The script is per turn (`{"per_turn": true}`): every run is answered from the '
            "script's start, so every run makes exactly 2 model calls (checked: "
            "`usage.model_calls` of every run), and the provider keeps no requests. "
            if not options.shared_script
            else "This run used the stock provider (`--shared-script`): runs marked * did not "
            "make exactly 2 model calls. "
        )
        + "The pack's other hook reports from inside each worker the event-loop lag (a "
        "callback scheduled every 20 ms from a thread: how late it ran) and SQLAlchemy "
        "counters (pool, transactions, statements).",
        "",
        f"### Throughput, zero-latency model ({options.runs} runs a case)",
        "",
        f"**This machine has {cores} cores**: one worker process and PostgreSQL already use "
        "most of both, so 2 or 4 worker processes share the same cores with PostgreSQL (and "
        "the bench); separate worker machines would scale further. Each process may open up to "
        "30 connections (pool 10 + overflow 20) whatever its concurrency.",
        "",
        throughput_table(throughput) if throughput else "(not run)",
        "",
        f"### Slow model: every model call takes {SLOW_DELAY_S:g} s",
        "",
        f"{options.slow_runs} runs of 2 model calls each, {processes(options.slow_workers)} "
        f"with `--concurrency {slow_concurrency}`: the ideal wall time is "
        f"{IDEAL_SLOW_S:g} s. Repeated {max(1, options.slow_repeat)} times (the runs are "
        "few and the machine small, so the wall time moves from one repeat to the next); the "
        "row is the median repeat. Peak RSS is the worker's `VmHWM` (/proc) read just before "
        "it is stopped, the highest of the repeats.",
        "",
        slow_table(slow) if slow else "(not run)",
        "",
        "Goals:",
        "",
        *verdicts(throughput, slow),
        "",
        "What limits it:",
        "",
        *findings(throughput, slow, options),
        "",
        "Where the time goes, measured inside the workers by the pack's hook (SQLAlchemy "
        "events; getting a pooled connection includes waiting for one, opening one and the "
        "pre-ping) and from /proc (CPU between T0 and the last finish; PostgreSQL is the "
        "server and all its backends):",
        "",
        detail_table([*throughput, *slow]),
        "",
    ]
    if options.profile:
        lines += ["(Profiled run: the profiler inflates every time.)", ""]
    return "\n".join(lines)


# Command line ---------------------------------------------------------------------------------


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1000, help="runs per throughput case")
    parser.add_argument(
        "--workers", default="1,2,4", help="worker processes per PostgreSQL case (SQLite: 1)"
    )
    parser.add_argument(
        "--concurrency",
        default="32,8",
        help="concurrent runs per worker (throughput); a list repeats the PostgreSQL cases",
    )
    parser.add_argument(
        "--slow-runs", type=int, default=500, help="runs of the slow case (0: skip)"
    )
    parser.add_argument(
        "--slow-concurrency",
        type=int,
        default=0,
        help="the slow worker's --concurrency (default: --slow-runs)",
    )
    parser.add_argument("--threads", type=int, default=0, help="threads per case (0: one per run)")
    parser.add_argument("--databases", default="postgres,sqlite", help="postgres,sqlite")
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES, help="an admin connection")
    parser.add_argument("--poll", type=float, default=0.1, help="PRESSLOOP_WORKER_POLL (s)")
    parser.add_argument(
        "--lead",
        type=float,
        default=0.0,
        help="seconds from the inserts' start to T0 (0: sized from the thread inserts)",
    )
    parser.add_argument("--timeout", type=float, default=180.0, help="per case (s)")
    parser.add_argument(
        "--quiet-wait",
        type=float,
        default=60.0,
        help="wait up to this long (s) before each case for other work to leave the machine idle",
    )
    parser.add_argument(
        "--slow-repeat", type=int, default=3, help="repeats of the slow case (median reported)"
    )
    parser.add_argument(
        "--slow-workers", type=int, default=1, help="worker processes of the slow case"
    )
    parser.add_argument(
        "--shared-script",
        action="store_true",
        help="the stock scripted provider (one script position per process)",
    )
    parser.add_argument(
        "--no-stats", action="store_true", help="without the in-worker statistics hook"
    )
    parser.add_argument("--keep", type=Path, help="keep worker logs and SQLite files here")
    parser.add_argument("--write", type=Path, help="replace this section of a Markdown file")
    parser.add_argument("--profile", type=Path, help="write profiles of the workers here")
    parser.add_argument(
        "--profiler",
        choices=["pyinstrument", "cprofile"],
        default="pyinstrument",
        help="for --profile",
    )
    options = parser.parse_args(argv)
    options.databases = [name.strip() for name in options.databases.split(",") if name.strip()]
    unknown = set(options.databases) - set(DATABASE_NAMES)
    if unknown:
        parser.error(f"unknown databases: {', '.join(sorted(unknown))}")
    options.workers = [int(n) for n in options.workers.split(",") if n.strip()]
    options.concurrency = [int(n) for n in options.concurrency.split(",") if n.strip()]
    if options.profile and options.write:
        parser.error("a profiled run is slower: do not --write its numbers")
    return options


def cases(options: argparse.Namespace) -> tuple[list[Case], list[Case]]:
    throughput: list[Case] = []
    slow: list[Case] = []
    for key in options.databases:
        counts = options.workers if key == "postgres" else [1]
        levels = options.concurrency if key == "postgres" else options.concurrency[:1]
        if options.runs > 0:
            throughput += [
                Case(
                    key=key,
                    workers=n,
                    concurrency=concurrency,
                    runs=options.runs,
                    threads=min(options.threads or options.runs, options.runs),
                    slow=False,
                )
                for concurrency in levels
                for n in counts
            ]
        if options.slow_runs > 0:
            slow.append(
                Case(
                    key=key,
                    workers=options.slow_workers,
                    concurrency=options.slow_concurrency
                    or -(-options.slow_runs // options.slow_workers),
                    runs=options.slow_runs,
                    threads=min(options.threads or options.slow_runs, options.slow_runs),
                    slow=True,
                )
            )
    return throughput, slow


def progress(o: Outcome) -> None:
    print(
        f"{o.case.label}: {o.succeeded}/{o.case.runs} succeeded ({o.wrong_rounds} with other "
        f"than {ROUNDS} model calls) in {o.wall_s:.2f} s = {o.runs_per_s:.1f} runs/s; "
        f"peak running {o.peak_running}; worker CPU {o.worker_cpu_s:.1f} s; "
        f"inserted in {o.insert_s:.1f} s (lead {o.lead_s:.1f} s); peak RSS "
        f"{', '.join(f'{m:.0f}' for m in o.peak_rss_mb)} MB; stopped in "
        f"{', '.join(f'{s:.1f}' for s in o.stop_s)} s, exit codes {o.exit_codes}",
        file=sys.stderr,
    )
    print(
        f"  per run: {o.stats.transactions / o.case.runs:.1f} transactions, "
        f"{o.stats.checkouts / o.case.runs:.1f} pool checkouts (each pre-pinged), "
        f"{o.stats.connects / o.case.runs:.2f} connections opened; SQL statements: "
        f"{statements_breakdown(o)}",
        file=sys.stderr,
    )
    if o.retried:
        print(f"  {o.retried} runs needed more than one attempt", file=sys.stderr)
    for message, count in sorted(o.log_errors.items(), key=lambda item: -item[1])[:8]:
        print(f"  {count} x {message}", file=sys.stderr)
    waits = lock_waits(o)
    if waits:
        print(f"  sessions waiting on a lock (summed over samples): {waits}", file=sys.stderr)


def median_trial(trials: list[Outcome]) -> Outcome:
    """The repeat with the median wall time, carrying all the repeats."""
    ordered = sorted(trials, key=lambda o: o.wall_s)
    chosen = ordered[(len(ordered) - 1) // 2]
    chosen.trials = trials
    return chosen


async def run(options: argparse.Namespace) -> tuple[list[Outcome], list[Outcome]]:
    throughput_cases, slow_cases = cases(options)
    postmaster = None
    options.pg_max = "?"
    options.connection_cost = None
    if "postgres" in options.databases:
        postmaster = await postmaster_pid(options.postgres_url)
        options.pg_max = await admin_sql(options.postgres_url, "SHOW max_connections")
        options.connection_cost = await connection_cost(options.postgres_url, postmaster)
    throughput: list[Outcome] = []
    slow: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="pressloop-bg-") as tmp:
        bench = Bench(options, options.keep or Path(tmp), postmaster)
        for case in throughput_cases:
            throughput.append(await bench.run_case(case))
            progress(throughput[-1])
        for case in slow_cases:
            trials = []
            for _ in range(max(1, options.slow_repeat)):
                trials.append(await bench.run_case(case))
                progress(trials[-1])
            slow.append(median_trial(trials))
    return throughput, slow


def main(argv: Sequence[str] | None = None) -> None:
    options = parse(sys.argv[1:] if argv is None else argv)
    command = "python " + shlex.join(sys.argv)
    load = os.getloadavg()
    code = code_version()
    throughput, slow = asyncio.run(run(options))
    section = report(throughput, slow, options, command, load, code, code_version())
    print(section)
    if options.write is not None:
        write_section(options.write, section, start=START_MARKER, end=END_MARKER)
        print(f"wrote {options.write}", file=sys.stderr)


if __name__ == "__main__":
    main()

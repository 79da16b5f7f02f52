"""The cases the benchmark runs, what it measures of each, and the scripted model's answers."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pressloop.contracts import RunStatus

BENCH_DIR = Path(__file__).resolve().parent.parent
ROOT = BENCH_DIR.parent
SLOW_DELAY_S = 1.0
# Goals for the slow cases, by (runs, tool rounds): issue 3 (500 runs, 2 model calls each)
# and issue 6 (1,000 turns of 3 tool rounds: 4 model calls). Other sizes get the first.
GOALS = {(500, 1): 1.5, (1000, 3): 1.3}
DEFAULT_GOAL = 1.5
GOAL_RSS_MB = 500.0  # megabytes (10^6 bytes)
SAMPLE_S = 0.1
STOP_GRACE_S = 15.0
START_MARKER = "<!-- background:start -->"
END_MARKER = "<!-- background:end -->"
DEFAULT_POSTGRES = os.environ.get(
    "PRESSLOOP_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test"
)
DATABASE_NAMES = {"sqlite": "SQLite", "postgres": "PostgreSQL"}
CLOCK_TICK_S = 1 / os.sysconf("SC_CLK_TCK")
EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Lost|Exceeded)\b.*")


def message(rounds: int) -> str:
    return f"Call the noop action {rounds} times, one call an answer, then say done."


def script(delay_s: float, rounds: int, *, per_turn: bool = True) -> dict[str, Any]:
    """`rounds` noop tool calls, then the final text (each after `delay_s`). Per turn, every
    run gets the script from its start; shared, one position cycles through the process."""
    delay = {"delay_s": delay_s} if delay_s else {}
    call = {"tool_calls": [{"name": "noop", "arguments": {}}], **delay}
    return {
        "per_turn": per_turn,
        "cycle": True,
        "answers": [*(dict(call) for _ in range(rounds)), {"text": "done", **delay}],
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
    rounds: int = 1  # tool rounds a run: `rounds` + 1 model calls

    @property
    def model_calls(self) -> int:
        return self.rounds + 1

    @property
    def ideal_s(self) -> float:
        """The slow case's wall time if the runtime cost nothing: its model calls in a row."""
        return self.model_calls * SLOW_DELAY_S

    @property
    def goal_ratio(self) -> float:
        return GOALS.get((self.runs, self.rounds), DEFAULT_GOAL)

    @property
    def label(self) -> str:
        kind = f"slow{self.runs}r{self.rounds}" if self.slow else "throughput"
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
    wrong_rounds: int = 0  # runs that did not make exactly `case.model_calls` model calls
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

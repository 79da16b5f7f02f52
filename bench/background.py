"""Background runs through real worker processes: throughput, and many slow model calls at once.

Throughput: for 1, 2 and 4 `pressloop worker` processes on PostgreSQL (at each `--concurrency`,
default 32 and 8 per process) and one on SQLite, N runs (each 2 rounds: the scripted model,
without latency, calls a no-op `read` action, then answers) are queued straight into a fresh
database with `not_before = T0`, so every worker sees all of them become due at the same instant;
runs/s = N / (T0 -> the last run's `finished_at`).

Slow model: one worker process with `--concurrency N` and N runs whose every model call takes
1 s, repeated 3 times: 500 runs of 1 tool round (2 model calls: the ideal wall time is 2 s) and
1,000 runs of 3 tool rounds (4 model calls: ideal 4 s); the wall time against the ideal, the
peak of runs `running` at once (the runs table sampled every 100 ms) and the worker's peak RSS
(VmHWM).

The workers are started first and waited for ("started" in their log), so their start-up is not
measured. They are stopped with SIGTERM at the end (SIGKILL after 15 s). Inside them the action
pack `bench/noop_pack.py` answers the script per run and reports event-loop lag and SQLAlchemy
counters (see its docstring).

    python bench/background.py                          # everything, about 4 minutes
    python bench/background.py --write docs/benchmarks.md
    python bench/background.py --databases postgres --workers 1 --runs 300 --slow none
    python bench/background.py --runs 0 --slow 1000x3 --slow-repeat 1   # issue 6's case only
    python bench/background.py --databases postgres --workers 1 --profile /tmp/profiles
    python bench/background.py --runs 0 --shared-script  # the stock scripted provider
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from common import admin_sql, code_version, write_section
from workers.machine import connection_cost, postmaster_pid
from workers.measure import Bench
from workers.model import (
    DATABASE_NAMES,
    DEFAULT_POSTGRES,
    END_MARKER,
    START_MARKER,
    Case,
    Outcome,
)
from workers.report import report
from workers.tables import lock_waits, statements_breakdown


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
        "--slow",
        default="500x1,1000x3",
        help="slow cases, RUNSxTOOL_ROUNDS each ('none': skip)",
    )
    parser.add_argument(
        "--slow-concurrency",
        type=int,
        default=0,
        help="the slow worker's --concurrency (default: the case's runs)",
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
    options.slow = [
        (int(runs), int(rounds))
        for runs, rounds in (item.split("x") for item in options.slow.split(",") if "x" in item)
    ]
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
        slow += [
            Case(
                key=key,
                workers=options.slow_workers,
                concurrency=options.slow_concurrency or -(-runs // options.slow_workers),
                runs=runs,
                threads=min(options.threads or runs, runs),
                slow=True,
                rounds=rounds,
            )
            for runs, rounds in options.slow
        ]
    return throughput, slow


def progress(o: Outcome) -> None:
    print(
        f"{o.case.label}: {o.succeeded}/{o.case.runs} succeeded ({o.wrong_rounds} with other "
        f"than {o.case.model_calls} model calls) in {o.wall_s:.2f} s = {o.runs_per_s:.1f} runs/s; "
        f"peak running {o.peak_running}; worker CPU {o.worker_cpu_s:.1f} s; "
        f"inserted in {o.insert_s:.1f} s (lead {o.lead_s:.1f} s); peak RSS "
        f"{', '.join(f'{m:.0f}' for m in o.peak_rss_mb)} MB; stopped in "
        f"{', '.join(f'{s:.1f}' for s in o.stop_s)} s, exit codes {o.exit_codes}",
        file=sys.stderr,
    )
    print(
        f"  per run: {o.stats.transactions / o.case.runs:.1f} transactions, "
        f"{o.stats.checkouts / o.case.runs:.1f} pool checkouts, "
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

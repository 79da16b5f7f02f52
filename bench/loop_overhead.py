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
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from common import code_version, write_section
from overhead.measure import Result, bench_database
from overhead.report import report
from overhead.workload import DATABASE_NAMES, DEFAULT_POSTGRES, END_MARKER, START_MARKER


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

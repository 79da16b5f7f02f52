"""The section of docs/benchmarks.md: tables and the verdict."""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence
from datetime import UTC, datetime

from common import machine_facts, percentile, table

from overhead.measure import Result
from overhead.workload import GOAL_RATIO, ROUNDS


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


# What the profile of a turn showed, and what was changed for it (kept with the numbers it
# explains; update it with the code).
CHANGES = [
    "### What the profile showed, and what changed (2026-11-30)",
    "",
    "A turn cost 4 write commits, 1 read transaction and 19 statements, and about half of its "
    "client CPU was SQLAlchemy building statements and their cache keys. Changed: the run's "
    "agent, history, memories, kill switch and budget counters are read in the claim's "
    "transaction (no read transaction of its own), a claim that only claims needs no "
    "savepoint, events and checkpoints go through the process's group committer (with a "
    "model that answers at once, a turn reaches its finish before the committer runs: one "
    "commit carries all its events, its transcript and its finish), and the statements "
    "every turn runs are built once (`store/db.py`). Now 3 write commits, no read "
    "transaction, 16 statements (7 of them in `Service.submit`).",
    "",
    "Before and after on the same machine at the same time (300 turns each, twice, "
    "alternating; load average about 5 from other work, so PostgreSQL's bare commit took "
    "3.9 ms instead of the usual 0.7): overhead per round SQLite 8.2 / 9.2 -> 4.4 / 4.3 ms, "
    "PostgreSQL 13.4 / 9.4 -> 8.0 / 5.8 ms; turn median SQLite 24.7 / 27.7 -> 13.3 / 13.0 "
    "ms, PostgreSQL 40.1 / 28.3 -> 24.0 / 17.4 ms; event-loop CPU a round SQLite 4.4 / 4.8 "
    "-> 2.3 / 2.2 ms, PostgreSQL 4.7 / 4.0 -> 2.4 / 2.4 ms.",
    "",
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
        *CHANGES,
    ]
    return "\n".join(lines)

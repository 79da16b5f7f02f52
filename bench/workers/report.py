"""The section of docs/benchmarks.md: facts, tables, goals met or missed, and what limits it."""

from __future__ import annotations

import argparse
import os
import statistics
from collections.abc import Sequence
from datetime import UTC, datetime

from common import machine_facts

from pressloop.config import Settings
from workers.model import GOAL_RSS_MB, SLOW_DELAY_S, Outcome
from workers.tables import (
    case_name,
    detail_table,
    lock_waits,
    num,
    per_run_ms,
    slow_table,
    throughput_table,
)


def processes(count: int) -> str:
    return "one worker process" if count == 1 else f"{count} worker processes"


def verdicts(throughput: Sequence[Outcome], slow: Sequence[Outcome]) -> list[str]:
    lines = []
    for o in slow:
        ratio = o.wall_s / o.case.ideal_s
        peak_mb = o.peak_mb
        time_ok = ratio <= o.case.goal_ratio and o.all_good
        lines.append(
            f"- {o.name}, {o.case.runs} runs of {o.case.model_calls} model calls of "
            f"{SLOW_DELAY_S:g} s in {processes(o.case.workers)}: wall time "
            f"{o.wall_s:.2f} s = {ratio:.2f}x the ideal {o.case.ideal_s:g} s, "
            f"**{'met' if time_ok else 'missed'}** (goal <= {o.case.goal_ratio:g}x); peak RSS "
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
    pool = Settings(database_url="sqlite://")
    churn = [o for o in pg if o.stats.connects > 5 * o.case.workers]
    if cost is not None and churn:
        worst = max(churn, key=lambda o: o.stats.connects / o.case.runs)
        lines.append(
            f"- Connection churn: {case_name(worst)} opened {worst.stats.connects} connections "
            f"for {worst.case.runs} runs. The pool keeps {pool.resolved_db_pool_size()} "
            "connections and closes every overflow connection it gets back while they are "
            "idle. Measured here, "
            f"a transaction on a new connection costs {cost.new_wall_ms:.1f} ms "
            f"({cost.new_client_ms:.1f} ms of the client's CPU, {cost.new_server_ms:.1f} ms of "
            f"PostgreSQL's), on a pooled one {cost.pooled_wall_ms:.2f} ms "
            f"({cost.pooled_client_ms:.2f} ms, {cost.pooled_server_ms:.2f} ms)."
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
    for concurrency in dict.fromkeys(o.case.concurrency for o in throughput):
        group = [o for o in pg if not o.case.slow and o.case.concurrency == concurrency]
        pairs = zip(group, group[1:], strict=False)
        flat = [b for a, b in pairs if b.runs_per_s < a.runs_per_s * 1.05]
        if flat:
            o = flat[0]
            lines.append(
                f"- {case_name(o)} is no faster than with fewer processes: the machine was "
                f"{o.machine_busy:.0%} busy (CPU s: workers {o.worker_cpu_s:.1f}, PostgreSQL "
                f"{num(o.postgres_cpu_s, 1)}, other work {max(0.0, o.other_cpu_s):.1f}) on "
                f"{len(os.sched_getaffinity(0))} cores; each run cost "
                f"{o.worker_cpu_s * 1000 / o.case.runs:.1f} ms of worker CPU and "
                f"{per_run_ms(o.postgres_cpu_s, o.case.runs)} ms of PostgreSQL's, and the "
                "workers held at most "
                f"{num(o.peak('connections'), 0)} connections."
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


# What the profiles of this benchmark showed, and what was changed for it (kept with the
# numbers it explains; update it with the code).
CHANGES = [
    "### What the profile showed, and what changed (2026-11-30)",
    "",
    "Before: 500 slow runs took 1.83x (PostgreSQL) and 2.45x (SQLite) the ideal; the worker "
    "spent 5.9 / 9.5 ms of CPU a run, mostly building and compiling SQLAlchemy statements; "
    "the last run started 1.2 / 2.1 s after T0; a run waited 434 / 1,610 ms for pooled "
    "connections (each run's writer held its own, 30 / 15 at most), and 4 PostgreSQL "
    "processes ran out of `max_connections`. The profile and the plans showed:",
    "",
    "- The claim query, on a table PostgreSQL had not analysed yet (every benchmark, and any "
    "fresh burst), became a nested loop over every queued run for every candidate: 110 ms "
    "a claim of 50 among 500 queued runs, 320 ms among 1,000. Now one correlated 'head of "
    "the thread' lookup (`store/claims.py`): 19 ms, whatever the statistics.",
    "- Each run wrote through its own transactions (a fence, its events, its finish: 3-4 "
    "transactions and 11-13 statements a run), so a burst of 500 model answers queued for "
    "the pool. Now one group committer per process (`runtime/commits.py`) writes what every "
    "run has pending in one transaction (each run still fenced by its own lease token; a "
    "run that lost its lease, or whose write fails, fails alone), statements sent once for "
    "the batch (executemany): 0.1 transactions and 0.4-0.8 statements a run here.",
    "- A run read its agent, history, memories, the kill switch and the day's budgets in "
    "its own transaction before its first model call (5 statements). Now a claim of up to "
    "200 runs reads them for the whole batch in the claim's transaction "
    "(`runtime/context.py`).",
    "- One lease keeper task for the process instead of a renewer task (and timer) per run; "
    "the statements every turn runs are built once (`store/db.py`); the worker process "
    "freezes its start-up objects and collects the young generation every 50,000 "
    "allocations (the cyclic GC had been about a fifth of its CPU).",
    "",
    "Before and after on the same machine at the same time (500 slow runs, load average "
    "about 5 from other work): the code before these changes took 6.14 and 8.66 s "
    "(PostgreSQL) and 9.17 and 9.27 s (SQLite), 3.1-4.6x the ideal, with 7.3 / 16.4 ms of "
    "worker CPU a run; this code 1.1-1.2x, about 1.1 / 1.2 ms a run (the table above).",
    "",
]


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
    pool = Settings(database_url="sqlite://")
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
        "budgets are still read). A throughput run is 2 model calls: the scripted model calls "
        "a no-op `read` action, then answers with text (the slow cases below say theirs). "
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
            "script's start, so every run makes exactly its model calls (checked: "
            "`usage.model_calls` of every run), and the provider keeps no requests. "
            if not options.shared_script
            else "This run used the stock provider (`--shared-script`): runs marked * did not "
            "make exactly their model calls. "
        )
        + "The pack's other hook reports from inside each worker the event-loop lag (a "
        "callback scheduled every 20 ms from a thread: how late it ran) and SQLAlchemy "
        "counters (pool, transactions, statements).",
        "",
        f"### Throughput, zero-latency model ({options.runs} runs a case)",
        "",
        f"**This machine has {cores} cores**: one worker process and PostgreSQL already use "
        "most of both, so 2 or 4 worker processes share the same cores with PostgreSQL (and "
        "the bench); separate worker machines would scale further. A process writes its runs "
        "through one group committer and claims in its own transactions, so it holds 2 or 3 "
        "connections whatever its concurrency (its pool may open up to "
        f"{pool.resolved_db_pool_size()} + {pool.db_max_overflow}).",
        "",
        throughput_table(throughput) if throughput else "(not run)",
        "",
        f"### Slow model: every model call takes {SLOW_DELAY_S:g} s",
        "",
        f"{processes(options.slow_workers)} with `--concurrency` as many as its runs; each "
        "run makes its model calls in a row (a tool round: a no-op action call, then the next "
        "model call; the last answer is text), so the ideal wall time is the calls x 1 s. "
        f"Repeated {max(1, options.slow_repeat)} times (the runs are "
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
        "events; getting a pooled connection includes waiting for one and opening one) and "
        "from /proc (CPU between T0 and the last finish; PostgreSQL is the server and all its "
        "backends):",
        "",
        detail_table([*throughput, *slow]),
        "",
        *CHANGES,
    ]
    if options.profile:
        lines += ["(Profiled run: the profiler inflates every time.)", ""]
    return "\n".join(lines)

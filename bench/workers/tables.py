"""The Markdown tables of the section."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from common import percentile, table

from workers.model import GOAL_RSS_MB, Outcome, WorkerStats


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
        ratio = o.wall_s / o.case.ideal_s
        met = ratio <= o.case.goal_ratio and o.all_good
        walls = sorted(t.wall_s for t in o.trials or [o])
        spread = f" ({', '.join(f'{w:.2f}' for w in walls)})" if len(walls) > 1 else ""
        rows.append(
            [
                f"{o.name} {o.version.split()[0]}",
                str(o.case.workers),
                str(o.case.concurrency),
                str(o.case.model_calls),
                f"{o.succeeded}/{o.case.runs}" + ("" if o.wrong_rounds == 0 else "*"),
                num(o.wall_s, 2) + spread,
                f"{o.case.ideal_s:g}",
                f"**{ratio:.2f}x**",
                f"<= {o.case.goal_ratio:g}x: {'met' if met else 'missed'}",
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
            "model calls / run",
            "succeeded",
            "T0 -> last finish (s): median (each repeat)",
            "ideal (s)",
            "/ ideal",
            "goal",
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

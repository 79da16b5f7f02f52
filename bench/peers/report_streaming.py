"""Workload 3's report: first frames under N concurrent streams, each system's repeats and
their spread, the floors beside the systems, and the goals of issue 19 judged over repeats."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

from bench.common import percentile, table
from bench.peers.report import DB_NAMES, Verdict, _best_peer, _name
from bench.peers.system import FLOORS

FIRST_FRAME_GOAL_MS = 20.0
FIRST_FRAME_P99_VS_PEER = 0.5  # Pressloop's p99 / the best peer's p99, at most
FIRST_FRAME_MEDIAN_VS_PEER = 1.0  # Pressloop's median / the best peer's median, at most

SERVING_PATHS = {"pressloop": "`pressloop serve`", "direct": "none"}


def serving_path(kind: str) -> str:
    """How a system's streams were served (`pressloop-N`: N serving processes on the port)."""
    if kind.startswith("pressloop-"):
        return f"`pressloop serve`, {kind.removeprefix('pressloop-')} processes"
    return SERVING_PATHS.get(kind, "bench FastAPI SSE app")


def _has_peer(values: dict[str, float]) -> bool:
    return any(k != "pressloop" and k not in FLOORS for k in values)


def _repeats(result: dict[str, Any] | list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A system's streaming runs (results saved before --repeats hold one run, not a list)."""
    return result if isinstance(result, list) else [result]


def _spread(values: list[float], fmt: str, *, bold: bool = False) -> str:
    """The median over the repeats (min-max)."""
    real = [v for v in values if not math.isnan(v)]
    if not real:
        return "-"
    middle = fmt.format(statistics.median(real))
    middle = f"**{middle}**" if bold else middle
    if len(real) == 1:
        return middle
    return f"{middle} ({fmt.format(min(real))}-{fmt.format(max(real))})"


def _judge(values: list[float], goal: float) -> str:
    """met in every repeat, missed in every repeat, or within noise: the spread crosses the goal
    (a repeat that measured nothing misses)."""
    met = [not math.isnan(v) and v <= goal for v in values]
    return "met" if all(met) else "missed" if not any(met) else "within noise"


@dataclass(kw_only=True)
class _Repeat:
    """One round of one database: each system's first-frame p99 and median, the best peer's."""

    p99: dict[str, float]
    median: dict[str, float]
    best_key: str
    best_p99: float
    best_median_key: str
    best_median: float


def _round(runs: dict[str, dict[str, Any]]) -> _Repeat:
    p99 = {k: percentile(r["first_ms"], 99) for k, r in runs.items()}
    median = {
        k: statistics.median(r["first_ms"]) if r["first_ms"] else float("nan")
        for k, r in runs.items()
    }
    measured = {k: v for k, v in p99.items() if not math.isnan(v)}
    best_key, best = _best_peer(measured) if _has_peer(measured) else ("", float("nan"))
    medians = {k: v for k, v in median.items() if not math.isnan(v)}
    best_m_key, best_m = _best_peer(medians) if _has_peer(medians) else ("", float("nan"))
    return _Repeat(
        p99=p99,
        median=median,
        best_key=best_key,
        best_p99=best,
        best_median_key=best_m_key,
        best_median=best_m,
    )


def _div(value: float, best: float) -> float:
    return value / best if best > 0 else float("nan")


def streaming_section(results: dict[str, Any], verdicts: list[Verdict]) -> list[str]:
    rows, by_round = [], []
    repeats = 1
    for database, saved in results.items():
        systems = {key: _repeats(r) for key, r in saved.items()}
        count = min(len(runs) for runs in systems.values())
        repeats = max(repeats, count)
        rounds = [_round({k: runs[i] for k, runs in systems.items()}) for i in range(count)]
        for key, runs in systems.items():
            firsts = [f for r in runs for f in r["first_ms"]]
            path = serving_path(runs[0]["serving"])
            rss = [r["peak_rss_mb"] for r in runs if r["peak_rss_mb"]]
            cpu = [r["server_cpu_ms"] for r in runs if r.get("server_cpu_ms") is not None]
            turns = [statistics.median(r["turn_s"]) for r in runs if r["turn_s"]]
            ratios = [_div(rd.p99[key], rd.best_p99) for rd in rounds]
            rows.append(
                [
                    _name(key),
                    DB_NAMES[database],
                    path,
                    f"{sum(r['finished'] for r in runs)}/{sum(r['streams'] for r in runs)}",
                    _spread([rd.median[key] for rd in rounds], "{:.1f}"),
                    _spread([rd.p99[key] for rd in rounds], "{:.1f}", bold=True),
                    f"{max(firsts):.1f}" if firsts else "-",
                    _spread(ratios, "{:.2f}x"),
                    _spread(turns, "{:.2f}"),
                    _spread(cpu, "{:.1f}"),
                    f"{max(rss):.0f}" if rss else "-",
                ]
            )
        if "pressloop" not in systems:
            continue
        for i, rd in enumerate(rounds):
            run = systems["pressloop"][i]
            by_round.append(
                [
                    str(run.get("round", i + 1)),
                    DB_NAMES[database],
                    run.get("load", "-"),
                    f"{run['busy_loop_ms']:.0f}" if "busy_loop_ms" in run else "-",
                    f"{rd.median['pressloop']:.1f} / {rd.p99['pressloop']:.1f}",
                    _cpu_split(run),
                    f"{_name(rd.best_key)} {rd.best_p99:.1f}" if rd.best_key else "-",
                    f"{_div(rd.p99['pressloop'], rd.best_p99):.2f}x" if rd.best_key else "-",
                    f"{_name(rd.best_median_key)} {rd.best_median:.1f}"
                    if rd.best_median_key
                    else "-",
                    f"{_div(rd.median['pressloop'], rd.best_median):.2f}x"
                    if rd.best_median_key
                    else "-",
                    *(
                        f"{rd.median[floor]:.1f} / {rd.p99[floor]:.1f}" if floor in systems else "-"
                        for floor in FLOORS
                    ),
                ]
            )
        verdicts.append(_streaming_verdict(database, systems["pressloop"], rounds))
    head = ["system", "database", "serving path", "streams finished"]
    what = f"median of {repeats} repeats (min-max)" if repeats > 1 else "one run"
    head += [f"first frame median (ms), {what}", f"p99 (ms), {what}", "max (ms)"]
    head += [f"p99 vs best peer, {what}", f"turn median (s), {what}"]
    head += [f"server CPU a turn (ms), {what}", "server peak RSS (MiB)"]
    out = [table(head, rows)]
    if repeats > 1 and by_round:
        round_head = ["round", "database", "load average at its start"]
        round_head += ["busy loop at its start (ms)", "Pressloop median / p99"]
        round_head += ["Pressloop CPU a turn (ms): all / its stream processes"]
        round_head += ["best peer p99", "Pressloop p99 / best peer p99", "best peer median"]
        round_head += ["Pressloop median / best peer median"]
        round_head += [f"{name} median / p99" for name in FLOORS.values()]
        out += [
            "",
            "Each round (every system once, in a turning order; the busy loop, a million "
            "additions in Python timed just before Pressloop's case, says how fast a core was: "
            "repeats whose busy loops differ much were not measured on the same machine):",
            "",
            table(round_head, by_round),
        ]
    return out + relay_section(results)


def _cpu_split(run: dict[str, Any]) -> str:
    if run.get("server_cpu_ms") is None:
        return "-"
    stream = run.get("stream_cpu_ms")  # not in runs saved before it was measured
    return f"{run['server_cpu_ms']:.1f} / " + ("-" if stream is None else f"{stream:.1f}")


def relay_section(results: dict[str, Any]) -> list[str]:
    """With `--model-relay`: each of Pressloop's repeats beside the relay's reads of the same
    first tokens (nothing when the run had no relay)."""
    rows = []
    for database, saved in results.items():
        for i, run in enumerate(_repeats(saved.get("pressloop", []))):
            reads = run.get("relay_read_ms")
            if not reads:
                continue
            firsts = run["first_ms"]
            rows.append(
                [
                    str(run.get("round", i + 1)),
                    DB_NAMES[database],
                    f"{run['busy_loop_ms']:.0f}" if "busy_loop_ms" in run else "-",
                    f"{percentile(firsts, 50):.1f} / {percentile(firsts, 99):.1f}",
                    f"{percentile(reads, 50):.2f} / {percentile(reads, 99):.2f} / {max(reads):.2f}",
                    f"{len(reads)}/{len(firsts)}",
                    f"{run['relay_cpu_ms']:.2f}",
                ]
            )
    if not rows:
        return []
    head = ["round", "database", "busy loop at its start (ms)"]
    head += ["Pressloop first frame median / p99 (ms)"]
    head += ["relay read median / p99 / max (ms)", "first tokens the relay read"]
    head += ["relay CPU a turn, its whole life (ms)"]
    return [
        "",
        "Pressloop's model calls went through a relay (`--model-relay`, "
        "bench/peers/token_relay.py): a process that passes every byte of every model call and "
        "notes when it read each first token. Beside Pressloop's first frame, how long after the "
        "model server's write a process with no other work had the same tokens, under the same "
        "load: the floor of a design that takes a token's work out of the busy processes "
        "(Pressloop's own figure here includes the relay's hop):",
        "",
        table(head, rows),
    ]


def _streaming_verdict(database: str, ours: list[dict[str, Any]], rounds: list[_Repeat]) -> Verdict:
    p99s = [rd.p99["pressloop"] for rd in rounds]
    judged = [
        (
            f"p99 {_spread(p99s, '{:.1f}')} ms",
            _judge(p99s, FIRST_FRAME_GOAL_MS),
            f"<= {FIRST_FRAME_GOAL_MS:g} ms",
        )
    ]
    if all(rd.best_key for rd in rounds):
        ratios = [_div(rd.p99["pressloop"], rd.best_p99) for rd in rounds]
        judged.append(
            (
                f"p99 / best peer's p99 {_spread(ratios, '{:.2f}x')}",
                _judge(ratios, FIRST_FRAME_P99_VS_PEER),
                f"<= {FIRST_FRAME_P99_VS_PEER:g}x",
            )
        )
    if all(rd.best_median_key for rd in rounds):
        ratios = [_div(rd.median["pressloop"], rd.best_median) for rd in rounds]
        judged.append(
            (
                f"median / best peer's median {_spread(ratios, '{:.2f}x')}",
                _judge(ratios, FIRST_FRAME_MEDIAN_VS_PEER),
                f"<= {FIRST_FRAME_MEDIAN_VS_PEER:g}x",
            )
        )
    statuses = [status for _, status, _ in judged]
    missed = "missed" in statuses
    noise = not missed and "within noise" in statuses
    parts = "; ".join(f"{what} ({status}, goal {goal})" for what, status, goal in judged)
    if len(rounds) > 1:
        how = f"{len(rounds)} interleaved repeats, median (min-max)"
    else:
        how = "one run: its noise is not measured"
    if len(judged) == 1:
        parts += "; no peer measured: the goals against the best peer are not judged"
    return Verdict(
        workload="streaming",
        database=database,
        met=not missed and not noise,
        noise=noise,
        text=f"First frame under {ours[0]['streams']} concurrent streams, {DB_NAMES[database]} "
        f"({how}): {parts}: {{verdict}} (met: every goal met in every repeat; within noise: "
        "a goal met in some repeats only, none missed in all)",
    )

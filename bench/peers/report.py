"""The peers' section of docs/benchmarks.md, from the results of one run."""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass
from typing import Any

from bench.common import percentile, table
from bench.peers.system import FLOORS, ROUNDS, SYSTEMS

DB_NAMES = {"sqlite": "SQLite", "postgres": "PostgreSQL"}
GROWTH_LIMIT = 1.25  # "does not grow": at most this ratio, a margin for this machine's noise
# The growth ratio's interval: a percentile bootstrap of the ratio of medians, 95%, seeded so
# that the same samples always give the same interval.
GROWTH_RESAMPLES = 2000
GROWTH_CONFIDENCE = 0.95
CONCURRENCY_GOAL = 1.3

STORED = {
    "pressloop": "the round's model answer (checkpoint), its events, the lease; a write "
    "action's ledger intent before it runs, its outcome after",
    "langgraph": "a checkpoint after every step (agent node, tools node), written while the "
    "next step runs",
    "langgraph-sync": "a checkpoint after every step, written before the next step starts",
    "openai-agents": "the session's new items (model output, tool calls, tool results) after "
    "each model turn",
    "pydantic-ai": "nothing until the run ends; then the whole history (saved by the "
    "application, as the docs show)",
}


@dataclass(kw_only=True)
class Verdict:
    workload: str
    database: str
    met: bool
    text: str
    # Repeated measurements whose spread crosses the goal: neither met nor missed (not met).
    noise: bool = False

    def line(self) -> str:
        word = "**within noise**" if self.noise else "**met**" if self.met else "**missed**"
        return self.text.replace("{verdict}", word)


def ms(seconds: float) -> str:
    value = seconds * 1000
    if abs(value) >= 100:
        return f"{value:.0f}"
    return f"{value:.1f}" if abs(value) >= 10 else f"{value:.2f}"


def _name(key: str) -> str:
    return SYSTEMS.get(key) or FLOORS.get(key, key)


def _ratio(value: float, best: float) -> str:
    return f"{value / best:.2f}x" if best > 0 else "-"


def per_round(samples: dict[str, list[float]]) -> list[float]:
    """Overhead per round of each turn: (turn - its bare model turn) / rounds."""
    pairs = zip(samples["turn_s"], samples["floor_s"], strict=True)
    return [(turn - bare) / ROUNDS for turn, bare in pairs]


def _best_peer(values: dict[str, float]) -> tuple[str, float]:
    peers = {k: v for k, v in values.items() if k != "pressloop" and k not in FLOORS}
    key = min(peers, key=lambda k: peers[k])
    return key, peers[key]


def overhead_section(results: dict[str, Any], verdicts: list[Verdict]) -> list[str]:
    rows, floors = [], []
    for database, systems in results.items():
        medians = {
            k: statistics.median(per_round(r["samples"]["main"]))
            for k, r in systems.items()
            if k != "floor"
        }
        best_key, best = _best_peer(medians)
        for key, r in systems.items():
            s = r["samples"]["main"]
            if key == "floor":
                floors.append(
                    [
                        DB_NAMES[database],
                        ms(statistics.median(s["commit_s"])),
                        ms(percentile(s["commit_s"], 95)),
                        ms(statistics.median(s["model_s"])),
                        ms(statistics.median(s["model_stream_s"])),
                    ]
                )
                continue
            rounds = per_round(s)
            memory, before = r["memory"], r["memory_before"]
            rows.append(
                [
                    _name(key),
                    DB_NAMES[database],
                    str(len(rounds)),
                    ms(statistics.median(s["turn_s"])),
                    ms(statistics.median(s["floor_s"])),
                    f"**{ms(medians[key])}**",
                    ms(percentile(rounds, 95)),
                    _ratio(medians[key], best),
                    f"{before['rss']:.0f} -> {memory['rss']:.0f} ({memory['peak']:.0f})",
                ]
            )
        ours = medians["pressloop"]
        verdicts.append(
            Verdict(
                workload="overhead",
                database=database,
                met=ours <= best,
                text=f"Overhead per round, {DB_NAMES[database]}: Pressloop {ms(ours)} ms, best "
                f"peer {_name(best_key)} {ms(best)} ms ({ours / best:.2f}x): {{verdict}} (goal: "
                "at or below the best peer)",
            )
        )
    head = ["system", "database", "turns", "turn median (ms)", "bare model turn (ms)"]
    head += ["overhead/round median (ms)", "p95 (ms)", "vs best peer"]
    head += ["RSS before -> after the turns (peak), MiB"]
    floor_head = ["database", "bare commit median (ms)", "p95 (ms)"]
    floor_head += ["bare model turn (ms)", "bare model turn, streamed (ms)"]
    floors_table = table(floor_head, floors)
    return [table(head, rows), "", "The floors, measured in the same run:", "", floors_table]


def durability_section(crash: dict[str, Any]) -> str:
    rows = []
    keys = list(next(iter(crash.values())).keys()) if crash else []
    for key in keys:
        cells = []
        for database in crash:
            r = crash[database].get(key)
            if r is None:
                cells.append("-")
            elif r["error"]:
                cells.append(f"failed: {r['error']}")
            else:
                cells.append(
                    f"round {r['resumed_at_round']} ({r['rounds_repeated']} rounds run again)"
                )
        rows.append([_name(key), STORED[key], *cells])
    head = ["system", "durable after each round", *(f"resumed at, {DB_NAMES[d]}" for d in crash)]
    return table(head, rows)


BARE_NAMES = {
    "bare": "bare client",
    "bare-stream": "bare client, streamed",
    "bare-stream-aiohttp": "bare client, streamed, aiohttp transport",
}


def _floor_key(key: str, row: dict[str, Any]) -> str:
    if key != "pressloop":
        return "bare"
    # Results saved before the aiohttp floor existed have only the default transport's.
    return "bare-stream-aiohttp" if "bare-stream-aiohttp" in row else "bare-stream"


def concurrency_section(results: dict[str, Any], verdicts: list[Verdict]) -> str:
    rows = []
    for database, by_n in results.items():
        ideal = by_n["ideal_s"]
        sizes = [n for n in by_n if n.isdigit()]
        for n in sizes:
            row = by_n[n]
            for key, r in row.items():
                bare = key.startswith("bare")
                if bare:
                    name = BARE_NAMES[key]
                    done, memory = n, f"({r['memory']['peak']:.0f})"
                else:
                    name = _name(key)
                    done = f"{r['succeeded']}/{n}"
                    grown = r["memory"]["peak"] - r["memory_before"]["rss"]
                    memory = f"{r['memory']['peak']:.0f} (+{grown:.0f})"
                # Pressloop streams on the aiohttp transport; the peers call the SDK's default.
                floor = row[_floor_key(key, row)]["wall_s"]
                rows.append(
                    [
                        n,
                        DB_NAMES[database],
                        name,
                        done,
                        f"{r['wall_s']:.2f}",
                        f"**{r['wall_s'] / ideal:.2f}x**",
                        "-" if bare else f"{r['wall_s'] / floor:.2f}x",
                        f"{r['cpu_s'] / int(n) * 1000:.1f}" if "cpu_s" in r else "-",
                        memory,
                    ]
                )
        n = max(sizes, key=int)
        ours = by_n[n].get("pressloop")
        peers = {k: r["wall_s"] for k, r in by_n[n].items() if not k.startswith("bare")}
        if ours is not None and len(peers) > 1:
            best_key, best = _best_peer(peers)
            floor_key = _floor_key("pressloop", by_n[n])
            bare = by_n[n][floor_key]["wall_s"] / ideal
            ratio = ours["wall_s"] / ideal
            verdicts.append(
                Verdict(
                    workload="concurrency",
                    database=database,
                    met=ratio <= CONCURRENCY_GOAL and ours["succeeded"] == int(n),
                    text=f"{n} concurrent 1 s turns in one process, {DB_NAMES[database]}: "
                    f"{ours['wall_s']:.2f} s = {ratio:.2f}x the ideal {ideal:g} s, "
                    f"{ours['succeeded']}/{n} succeeded (best peer {_name(best_key)}: "
                    f"{best / ideal:.2f}x; {BARE_NAMES[floor_key]}: {bare:.2f}x): {{verdict}} "
                    f"(goal <= {CONCURRENCY_GOAL}x)",
                )
            )
    head = ["N", "database", "system", "succeeded", "wall (s)", "/ ideal", "/ bare client"]
    head += ["CPU per turn (ms)", "peak RSS, MiB (+ over the idle process)"]
    return table(head, rows)


def growth_ratio(small: float, large: float) -> float:
    """Overhead at the large size over that at the small one. A small-size overhead at or under
    zero (turns as fast as the bare model's, within the clock's noise) leaves the ratio without
    a scale: it is unbounded, so such a draw can never say "no growth" on its own."""
    return large / small if small > 0 else math.inf


def times(ratio: float) -> str:
    """A ratio as the tables write it: 1.10x, or "unbounded" where it has no scale."""
    return f"{ratio:.2f}x" if math.isfinite(ratio) else "unbounded"


def growth_interval(
    small: list[float], large: list[float], *, resamples: int = GROWTH_RESAMPLES
) -> tuple[float, float]:
    """How far the ratio median(large) / median(small) moves when the turns measured at each
    size are drawn again (with replacement): at overheads of a few tenths of a millisecond a
    single ratio is the machine's noise as much as growth, and this says how much."""
    draw = random.Random(0)
    ratios = sorted(
        growth_ratio(
            statistics.median(draw.choices(small, k=len(small))),
            statistics.median(draw.choices(large, k=len(large))),
        )
        for _ in range(resamples)
    )
    tail = (1 - GROWTH_CONFIDENCE) / 2
    return ratios[int(tail * resamples)], ratios[int((1 - tail) * resamples) - 1]


def growth_verdict(interval: tuple[float, float]) -> tuple[bool, bool]:
    """(met, within noise): met when the whole interval is at or under the limit, missed when
    the whole of it is over, within noise when it straddles the limit."""
    low, high = interval
    return high <= GROWTH_LIMIT, low <= GROWTH_LIMIT < high


def growth_section(results: dict[str, Any], verdicts: list[Verdict]) -> str:
    rows = []
    for database, systems in results.items():
        for key, r in systems.items():
            rounds = {int(label[4:]): per_round(s) for label, s in r["samples"].items()}
            by_size = {size: statistics.median(values) for size, values in rounds.items()}
            sizes = sorted(by_size)
            growth = growth_ratio(by_size[sizes[0]], by_size[sizes[-1]])
            low, high = growth_interval(rounds[sizes[0]], rounds[sizes[-1]])
            rows.append(
                [
                    _name(key),
                    DB_NAMES[database],
                    str(r["rows_per_copy"]),
                    *(ms(by_size[size]) for size in sizes),
                    f"**{times(growth)}**",
                    f"{times(low)} to {times(high)}",
                    f"{r['fill_s'][str(sizes[-1])]:.1f}",
                ]
            )
            if key == "pressloop":
                met, noise = growth_verdict((low, high))
                verdicts.append(
                    Verdict(
                        workload="growth",
                        database=database,
                        met=met,
                        noise=noise,
                        text=f"Growth with history, {DB_NAMES[database]}: overhead per round "
                        f"{ms(by_size[sizes[0]])} ms at {sizes[0]:,} stored conversations, "
                        f"{ms(by_size[sizes[-1]])} ms at {sizes[-1]:,} ({times(growth)}, "
                        f"{times(low)} to {times(high)} when the turns are drawn again): "
                        f"{{verdict}} "
                        f"(no growth: <= {GROWTH_LIMIT}x, this machine's noise; within noise: "
                        f"the interval straddles it)",
                    )
                )
    sizes_seen = sorted(
        {int(label[4:]) for s in results.values() for r in s.values() for label in r["samples"]}
    )
    head = ["system", "database", "rows per stored conversation"]
    head += [f"overhead/round at {n:,} (ms)" for n in sizes_seen]
    head += [f"{sizes_seen[-1]:,} / {sizes_seen[0]:,}", f"{int(GROWTH_CONFIDENCE * 100)}% interval"]
    head += [f"fill to {sizes_seen[-1]:,} (s)"]
    return table(head, rows)

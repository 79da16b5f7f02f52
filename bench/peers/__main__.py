"""Pressloop against LangGraph, the OpenAI Agents SDK and Pydantic AI, in one run: overhead per
round, concurrency on a slow model, streaming latency, growth with history, and what survives a
crash. Writes its section of docs/benchmarks.md.

    python -m bench.peers --write docs/benchmarks.md      # everything (20-40 minutes)
    python -m bench.peers --quick                         # a smoke run, small N
    python -m bench.peers --workloads streaming --databases postgres --streams 200
    python -m bench.peers --workloads streaming --databases sqlite --streams 200 --repeats 5
    python -m bench.peers --from-json /tmp/peers.json --write docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.common import admin_sql, write_section
from bench.peers import concurrency, document, facts, profiling, report, sequential, streaming
from bench.peers.procs import model_server
from bench.peers.system import FLOORS, SYSTEMS

WORKLOADS = ["overhead", "crash", "concurrency", "streaming", "growth"]
# LangGraph's durability=sync is measured where it changes the answer (overhead, crash); the
# other workloads use each system's default configuration.
DEFAULT_ONLY = [k for k in SYSTEMS if k != "langgraph-sync"]
DEFAULT_POSTGRES = os.environ.get(
    "PRESSLOOP_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test"
)


def _ints(text: str) -> list[int]:
    return [int(x.replace("_", "")) for x in text.split(",") if x]


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", type=Path, help="replace the peers' section of this file")
    parser.add_argument("--quick", action="store_true", help="small N: a smoke run")
    parser.add_argument("--databases", default="sqlite,postgres")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument(
        "--turns", type=int, default=300, help="workload 1, per system and database"
    )
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--block", type=int, default=50, help="turns per interleaved block")
    parser.add_argument("--concurrent", type=_ints, default=[100, 500, 1000])
    parser.add_argument(
        "--concurrency-databases",
        default="postgres",
        help="workload 2 is CPU-bound and long: by default on PostgreSQL only",
    )
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="workload 3: each system's streaming case this many times, interleaved (a round "
        "runs every system once); the report gives the median over the repeats and their spread",
    )
    parser.add_argument(
        "--no-floor",
        action="store_true",
        help="workload 3 without its two floors (harness alone, bare relay)",
    )
    parser.add_argument(
        "--serve-processes",
        type=int,
        default=1,
        help="workload 3: Pressloop's `pressloop serve` as this many processes on its port "
        "(PRESSLOOP_SERVE_PROCESSES; the peers' app stays one process)",
    )
    parser.add_argument(
        "--pressloop-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="workload 3: a setting of Pressloop's `pressloop serve` for an experiment (e.g. "
        "PRESSLOOP_COMMIT_THREAD=false); repeat for more (the report's command line shows them)",
    )
    parser.add_argument(
        "--model-relay",
        action="store_true",
        help="workload 3: Pressloop's model calls through a relay process that only passes "
        "bytes and notes when it read each first token (bench/peers/token_relay.py): how soon "
        "a process with no other work could have had it, under the same load",
    )
    parser.add_argument("--sizes", type=_ints, default=[10, 1000, 100_000])
    parser.add_argument("--growth-turns", type=int, default=90)
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES, help="an admin connection")
    parser.add_argument(
        "--json",
        type=Path,
        default=Path(tempfile.gettempdir()) / "pressloop-peers-results.json",
        help="also save the raw results here (re-render them with --from-json)",
    )
    parser.add_argument("--from-json", type=Path, help="render saved results, run nothing")
    parser.add_argument("--logs", type=Path, help="keep the processes' logs here")
    parser.add_argument(
        "--no-profile", action="store_true", help="do not profile Pressloop where it misses"
    )
    options = parser.parse_args(argv)
    if options.quick:
        options.turns, options.warmup, options.block = 60, 5, 20
        options.concurrent, options.streams = [50, 100], 30
        options.sizes, options.growth_turns = [10, 500], 20
    for name in ("databases", "systems", "workloads", "concurrency_databases"):
        setattr(options, name, [x.strip() for x in getattr(options, name).split(",") if x])
    unknown = set(options.systems) - set(SYSTEMS) | set(options.workloads) - set(WORKLOADS)
    if unknown or "pressloop" not in options.systems:
        parser.error(f"unknown names {sorted(unknown)} (and pressloop must be measured)")
    if options.repeats < 1:
        parser.error("--repeats must be at least 1")
    for setting in options.pressloop_env:
        name, equals, _value = setting.partition("=")
        if not equals or not name.startswith("PRESSLOOP_"):
            parser.error(f"--pressloop-env takes PRESSLOOP_NAME=value, not {setting!r}")
    return options


def _log(message: str) -> None:
    print(f"[{datetime.now():%H:%M:%S}] {message}", file=sys.stderr, flush=True)


async def run(options: argparse.Namespace, logs: Path, results: dict[str, Any]) -> None:
    every = options.systems
    defaults = [k for k in every if k in DEFAULT_ONLY]
    if "postgres" in options.databases:
        results["postgres"] = await admin_sql(options.postgres_url, "SHOW server_version")
    async with model_server(logs / "model-server.log") as port:
        ctx = sequential.Context(
            admin_url=options.postgres_url,
            data_dir=logs / "data",
            log_dir=logs,
            model_port=port,
            serve_processes=options.serve_processes,
            pressloop_env=dict(s.split("=", 1) for s in options.pressloop_env),
            model_relay=options.model_relay,
        )
        for workload in options.workloads:
            results["load"][workload] = facts.load()
            out: dict[str, Any] = results.setdefault(workload, {})
            for database in options.databases:
                if workload == "concurrency" and database not in options.concurrency_databases:
                    continue
                _log(f"{workload} on {database}")
                if workload == "overhead":
                    out[database] = await sequential.overhead(
                        ctx,
                        every,
                        database,
                        turns=options.turns,
                        warmup=options.warmup,
                        block=options.block,
                    )
                elif workload == "crash":
                    out[database] = {
                        key: await concurrency.crash(ctx, key, database) for key in every
                    }
                elif workload == "concurrency":
                    out[database] = await concurrency.concurrency(
                        ctx, defaults, database, options.concurrent
                    )
                elif workload == "streaming":
                    floor = [] if options.no_floor else list(FLOORS)
                    out[database] = await streaming.interleaved(
                        ctx, defaults + floor, database, options.streams, options.repeats, _log
                    )
                elif workload == "growth":
                    out[database] = await sequential.growth(
                        ctx,
                        defaults,
                        database,
                        sizes=options.sizes,
                        turns=options.growth_turns,
                        warmup=5,
                        block=max(5, options.growth_turns // 6),
                    )


async def profile_misses(options: argparse.Namespace, logs: Path, results: dict[str, Any]) -> None:
    """Run Pressloop again under pyinstrument for every goal it missed, and keep a summary."""
    missed: dict[str, report.Verdict] = {}
    for verdict in document.verdicts(results):
        # One profile per missed goal, on PostgreSQL when it missed there (the multi-worker
        # database), else on the database where it missed.
        if not verdict.met and (verdict.workload not in missed or verdict.database == "postgres"):
            missed[verdict.workload] = verdict
    if not missed or options.no_profile:
        return
    profiles: dict[str, str] = results.setdefault("profiles", {})
    async with model_server(logs / "model-server-profiles.log") as port:
        ctx = sequential.Context(
            admin_url=options.postgres_url, data_dir=logs / "data", log_dir=logs, model_port=port
        )
        for verdict in missed.values():
            name = f"{verdict.workload}-{verdict.database}"
            path = logs / f"profile-{name}.pyisession"
            _log(f"profiling Pressloop: {name}")
            what = await _profiled(ctx, options, verdict.workload, verdict.database, path)
            title = f"{what}, {report.DB_NAMES[verdict.database]}"
            profiles[name] = profiling.markdown(title, profiling.summary(path))


async def _profiled(
    ctx: sequential.Context, options: argparse.Namespace, workload: str, database: str, path: Path
) -> str:
    if workload == "overhead":
        turns = min(options.turns, 300)
        await sequential.overhead(
            ctx, ["pressloop"], database, turns=turns, warmup=5, block=turns, profile=path
        )
        return f"Overhead: {turns} sequential turns"
    if workload == "concurrency":
        n = min(max(options.concurrent), 500)
        await concurrency.profile_concurrency(ctx, database, n, path)
        return f"Concurrency: {n} turns at once on the 1 s model"
    if workload == "streaming":
        await streaming.stream_system(ctx, "pressloop", database, options.streams, profile=path)
        return f"Streaming: {options.streams} concurrent streams through `pressloop serve`"
    size = max(options.sizes)
    await sequential.growth(
        ctx,
        ["pressloop"],
        database,
        sizes=[size],
        turns=options.growth_turns,
        warmup=5,
        block=options.growth_turns,
        profile=path,
    )
    return f"Growth: {options.growth_turns} turns with {size:,} stored conversations"


def _save(options: argparse.Namespace, results: dict[str, Any]) -> None:
    options.json.write_text(json.dumps(results))
    _log(f"results saved to {options.json}")


def main(argv: list[str] | None = None) -> None:
    options = parse(sys.argv[1:] if argv is None else argv)
    if options.from_json:
        results = json.loads(options.from_json.read_text())
    else:
        started = time.perf_counter()
        results = {
            "started": f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
            "command": "python -m bench.peers "
            + shlex.join(sys.argv[1:] if argv is None else argv),
            "quick": options.quick,
            "code": facts.code_version(),
            "machine": facts.machine(),
            "cpu": streaming.cpu(),
            "load": {},
            "options": {
                "turns": options.turns,
                "warmup": options.warmup,
                "concurrent": options.concurrent,
                "streams": options.streams,
                "repeats": options.repeats,
                "sizes": options.sizes,
                "growth_turns": options.growth_turns,
            },
        }
        with tempfile.TemporaryDirectory(prefix="pressloop-peers-") as tmp:
            logs = options.logs or Path(tmp)
            logs.mkdir(parents=True, exist_ok=True)
            asyncio.run(run(options, logs, results))
            results["code_after"] = facts.code_version()
            results["wall_s"] = time.perf_counter() - started
            _save(options, results)  # before profiling: a failure there loses no measurement
            asyncio.run(profile_misses(options, logs, results))
            results["wall_s"] = time.perf_counter() - started
            _save(options, results)
    section = document.render(results)
    print(section)
    if options.write is not None:
        write_section(options.write, section, start=document.START_MARKER, end=document.END_MARKER)
        _log(f"wrote {options.write}")


if __name__ == "__main__":
    main()

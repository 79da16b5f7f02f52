"""Pickup: how long a run queued by one process waits before an idle `pressloop worker` in
another process starts it.

One real `pressloop worker` (`python -m pressloop.runtime.process`, the default poll of
`PRESSLOOP_WORKER_POLL`, 0.5 s) on a fresh database; the bench queues one run at a time from
its own process (`Service.submit`, as an API process with `PRESSLOOP_SERVE_RUNS=0` does), waits
for it to end, then leaves the worker idle for a random 0.2-1.2 s before the next. Pickup is the
run's `started_at` minus its `created_at` (the claim's clock minus the queueing one, the same
machine). On PostgreSQL the commit that queues the run notifies the listening worker
(`store/notify.py`); on SQLite the worker finds it at its next poll: the row beside it is what
the poll alone gives.

Then the worker is left idle for `--idle` seconds: the SQL statements it sends meanwhile (its
looks, counted inside it by `bench/noop_pack.py`'s hook, `PRESSLOOP_BENCH_STATS`) say what an
idle worker costs the database.

    python bench/pickup.py                      # both databases, 40 runs each, about 3 minutes
    python bench/pickup.py --databases postgres --runs 100
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from common import ROOT, code_version, database_url, percentile, table

from pressloop.config import Settings
from pressloop.contracts import RunStatus
from pressloop.runtime.service import Service
from pressloop.store import migrate
from pressloop.store.records import RunRecord

DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"
FINAL = {RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.DEAD}


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=40, help="runs per database")
    parser.add_argument("--databases", default="postgres,sqlite")
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES, help="an admin connection")
    parser.add_argument("--poll", type=float, default=0.5, help="PRESSLOOP_WORKER_POLL (s)")
    parser.add_argument("--seed", type=int, default=19)
    parser.add_argument("--idle", type=float, default=30.0, help="seconds the worker is left idle")
    return parser.parse_args(argv)


def start_worker(url: str, tmp: Path, poll_s: float) -> tuple[subprocess.Popen[bytes], Path]:
    script = tmp / "script.json"
    script.write_text(json.dumps({"cycle": True, "answers": [{"text": "Done."}]}))
    log = tmp / "worker.log"
    env = {
        **os.environ,
        "PRESSLOOP_DATABASE_URL": url,
        "PRESSLOOP_DATA_DIR": str(tmp / "worker"),
        "PRESSLOOP_PROVIDER": "scripted",
        "PRESSLOOP_SCRIPT": str(script),
        "PRESSLOOP_WORKER_POLL": str(poll_s),
        "PRESSLOOP_ACTION_PACKS": "noop_pack",  # its hook counts the worker's statements
        "PRESSLOOP_BENCH_STATS": str(tmp / "stats.jsonl"),
        "PYTHONPATH": os.pathsep.join(
            [str(ROOT / "bench"), str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
        ),
    }
    with log.open("ab") as output:
        worker = subprocess.Popen(
            [sys.executable, "-m", "pressloop.runtime.process", "--concurrency", "4"],
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    return worker, log


def read_log(log: Path) -> str:
    return log.read_text(encoding="utf-8", errors="replace")


async def wait_started(worker: subprocess.Popen[bytes], log: Path, limit_s: float = 60.0) -> None:
    deadline = time.monotonic() + limit_s
    while "started (concurrency 4)" not in read_log(log):
        if worker.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the worker did not start:\n{read_log(log)[-3000:]}")
        await asyncio.sleep(0.05)


async def wait_final(service: Service, run_id: str, limit_s: float = 30.0) -> RunRecord:
    deadline = time.monotonic() + limit_s
    while (record := await service.get_run(run_id)).status not in FINAL:
        if time.monotonic() > deadline:
            raise SystemExit(f"run {run_id} still {record.status} after {limit_s:g} s")
        await asyncio.sleep(0.02)
    return record


async def measure(key: str, args: argparse.Namespace, rng: random.Random) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="pressloop-pickup-") as folder:
        tmp = Path(folder)
        async with database_url(key, args.postgres_url, tmp) as url:
            settings = Settings(database_url=url, data_dir=tmp / "bench", provider="scripted")
            service = await Service.open(settings)  # migrates; no worker of its own
            worker, log = start_worker(url, tmp, args.poll)
            try:
                await wait_started(worker, log)
                await asyncio.sleep(1.0)  # its listener connected, its first look done
                pickups: list[float] = []
                for n in range(args.runs):
                    await asyncio.sleep(rng.uniform(0.2, 1.2))  # the worker idle, mid-poll
                    thread = await service.create_thread()
                    run = (await service.submit(thread.id, f"message {n}")).run
                    record = await wait_final(service, run.id)
                    assert record.started_at is not None, record
                    pickups.append((record.started_at - record.created_at).total_seconds() * 1e3)
                idle = await idle_statements(tmp / "stats.jsonl", args.idle)
            finally:
                worker.terminate()
                worker.wait(30)
                await service.close()
    return {
        "idle_per_min": idle,
        "median": percentile(pickups, 50),
        "p90": percentile(pickups, 90),
        "max": max(pickups),
        "runs": len(pickups),
    }


def statements_so_far(stats: Path) -> int:
    """The worker's SQL statements so far (its last line of `PRESSLOOP_BENCH_STATS`)."""
    lines = stats.read_text(encoding="utf-8").splitlines()
    return sum(json.loads(lines[-1])["statements"].values()) if lines else 0


async def idle_statements(stats: Path, seconds: float) -> float:
    """The worker's SQL statements a minute while nothing is queued (its looks)."""
    await asyncio.sleep(1.0)  # the last run is over, its counters written
    before = statements_so_far(stats)
    await asyncio.sleep(seconds)
    return (statements_so_far(stats) - before) * 60.0 / seconds


async def main(argv: Sequence[str]) -> None:
    args = parse(argv)
    rng = random.Random(args.seed)
    rows = []
    for key in args.databases.split(","):
        figures = await measure(key, args, rng)
        how = "NOTIFY at the commit, poll as backstop" if key == "postgres" else "the poll"
        rows.append(
            [
                {"postgres": "PostgreSQL", "sqlite": "SQLite"}[key],
                how,
                f"{args.poll:g}",
                str(int(figures["runs"])),
                f"{figures['median']:.1f}",
                f"{figures['p90']:.1f}",
                f"{figures['max']:.1f}",
                f"{figures['idle_per_min']:.0f}",
            ]
        )
    print(f"code: {code_version()}; migrations at {migrate.head_revision()}")
    print(
        table(
            [
                "database",
                "what wakes the idle worker",
                "worker poll (s)",
                "runs",
                "pickup median (ms)",
                "p90 (ms)",
                "max (ms)",
                "idle: SQL statements a minute",
            ],
            rows,
        )
    )


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))

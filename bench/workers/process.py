"""One `pressloop worker` process: started, watched, stopped, and its log and statistics read."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from workers.model import BENCH_DIR, EXCEPTION_LINE, ROOT, STOP_GRACE_S, Case, WorkerStats


class WorkerProcess:
    def __init__(
        self,
        *,
        index: int,
        case: Case,
        url: str,
        tmp: Path,
        script_path: Path,
        poll_s: float,
        stats: bool,
        profile_dir: Path | None,
        profiler: str = "pyinstrument",
    ) -> None:
        self.log_path = tmp / f"{case.label}-worker{index}.log"
        self.stats_path = tmp / f"{case.label}-worker{index}.stats.jsonl"
        env = {
            **os.environ,
            "PRESSLOOP_DATABASE_URL": url,
            "PRESSLOOP_DATA_DIR": str(tmp),
            "PRESSLOOP_PROVIDER": "scripted",
            "PRESSLOOP_SCRIPT": str(script_path),
            "PRESSLOOP_ACTION_PACKS": "noop_pack",
            "PRESSLOOP_WORKER_POLL": str(poll_s),
            # No daily budgets: one case runs far more than a day's default budget of actions.
            "PRESSLOOP_BUDGET_USER_ACTIONS": "0",
            "PRESSLOOP_BUDGET_USER_TOKENS": "0",
            "PRESSLOOP_BUDGET_SITE_ACTIONS": "0",
            "PRESSLOOP_BUDGET_SITE_TOKENS": "0",
            "PYTHONPATH": os.pathsep.join(
                [str(BENCH_DIR), str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
            ),
        }
        if stats:
            env["PRESSLOOP_BENCH_STATS"] = str(self.stats_path)
        command = [sys.executable]
        if profile_dir is not None:
            profile_dir.mkdir(parents=True, exist_ok=True)
            if profiler == "cprofile":  # deterministic: call counts, exact but slower
                out = profile_dir / f"{case.label}-worker{index}.prof"
                command += ["-m", "cProfile", "-o", str(out)]
            else:  # a session file: `pyinstrument --load FILE` renders it any way
                out = profile_dir / f"{case.label}-worker{index}.pyisession"
                command += ["-m", "pyinstrument", "-r", "pyisession", "-o", str(out)]
        command += ["-m", "pressloop.runtime.process", "--concurrency", str(case.concurrency)]
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=tmp
            )
        self.stop_s: float | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    def log_text(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    async def wait_started(self, limit_s: float = 60.0) -> None:
        deadline = time.monotonic() + limit_s
        while " started (concurrency" not in self.log_text():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"worker {self.pid} did not start:\n{self.log_text()[-3000:]}")
            await asyncio.sleep(0.05)

    def errors(self) -> dict[str, int]:
        """ERROR and WARNING log lines, by their message without ids."""
        found: dict[str, int] = {}
        for line in self.log_text().splitlines():
            parts = line.split(" ", 4)
            if len(parts) == 5 and parts[2] in ("ERROR", "WARNING"):
                message = f"{parts[2]} {parts[4]}"
            elif EXCEPTION_LINE.match(line):  # the last line of a traceback
                message = line
            else:
                continue
            message = re.sub(r"\b(run|thr)_\w+", r"\1_…", message)[:140]
            found[message] = found.get(message, 0) + 1
        return found

    def terminate(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)

    async def wait_stopped(self, started: float) -> int | None:
        """The exit code once stopped; None if it had to be killed after the grace period."""
        left = max(0.0, started + STOP_GRACE_S - time.monotonic())
        try:
            code = await asyncio.to_thread(self.process.wait, left)
        except subprocess.TimeoutExpired:
            self.process.kill()
            await asyncio.to_thread(self.process.wait, 10)
            return None
        self.stop_s = time.monotonic() - started
        return code

    def read_stats(self, start: float, end: float) -> WorkerStats:
        """Lags and pool counters from the lines written between `start` and `end` (epoch s)."""
        stats = WorkerStats()
        if not self.stats_path.exists():
            return stats
        lines = [json.loads(line) for line in self.stats_path.read_text().splitlines() if line]
        before = [line for line in lines if line["t"] <= start]
        window = [line for line in lines if start < line["t"] <= end + 0.1]
        if not window:
            return stats
        base: dict[str, Any] = before[-1] if before else {}
        last = window[-1]
        stats.lags_ms = [lag for line in window for lag in line["lag_ms"]]
        stats.pool_peak = max(line["peak_checked_out"] for line in window)
        stats.get_max_ms = max(line["get_max_ms"] for line in window)
        for name in ("connects", "checkouts", "get_s", "transactions"):
            setattr(stats, name, last[name] - base.get(name, 0))
        earlier = base.get("statements", {})
        stats.statements = {
            kind: count - earlier.get(kind, 0)
            for kind, count in last["statements"].items()
            if count > earlier.get(kind, 0)
        }
        return stats

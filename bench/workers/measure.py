"""One case: a fresh database, the workers, the runs inserted due at T0, and what happened."""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import sqlalchemy as sa
from common import admin_sql, database_url

from pressloop.config import Settings
from pressloop.contracts import FINAL_RUN_STATUSES, RunStatus, Trigger
from pressloop.policy import resolve_policy
from pressloop.providers.scripted import ScriptedProvider
from pressloop.runtime.service import Service
from pressloop.store import agents as agent_store
from pressloop.store import runs as run_store
from pressloop.store import threads as thread_store
from pressloop.store.db import Database
from pressloop.store.schema import runs
from workers.machine import (
    machine_ticks,
    memory_mb,
    own_cpu_s,
    process_cpu_s,
    tree_cpu_s,
    wait_for_quiet,
)
from workers.model import (
    CLOCK_TICK_S,
    SAMPLE_S,
    SLOW_DELAY_S,
    Case,
    Outcome,
    Sample,
    message,
    script,
)
from workers.process import WorkerProcess


class Bench:
    def __init__(self, options: argparse.Namespace, tmp: Path, postmaster: int | None) -> None:
        self.options = options
        self.tmp = tmp
        self.postmaster = postmaster
        self.count = 0

    async def run_case(self, case: Case) -> Outcome:
        version = (
            sqlite3.sqlite_version
            if case.key == "sqlite"
            else await admin_sql(self.options.postgres_url, "SHOW server_version")
        )
        outcome = Outcome(case=case, version=version)
        waited = time.monotonic()
        outcome.idle_before = await wait_for_quiet(self.options.quiet_wait)
        waited = time.monotonic() - waited
        if waited > 3:
            print(
                f"{case.label}: waited {waited:.0f} s for the machine to go idle", file=sys.stderr
            )
        if outcome.idle_before >= 0.2:
            print(
                f"{case.label}: the machine is still {outcome.idle_before:.0%} busy with other "
                "work; measuring anyway",
                file=sys.stderr,
            )
        self.count += 1
        case_dir = self.tmp / f"{self.count:02d}-{case.label}"
        case_dir.mkdir(parents=True)
        async with database_url(case.key, self.options.postgres_url, case_dir) as url:
            settings = Settings(data_dir=case_dir, database_url=url, provider="scripted")
            # Migrates the fresh database before any worker opens it.
            service = await Service.open(settings, provider=lambda: ScriptedProvider([]))
            workers: list[WorkerProcess] = []
            try:
                script_path = case_dir / "script.json"
                script_path.write_text(
                    json.dumps(
                        script(
                            SLOW_DELAY_S if case.slow else 0,
                            case.rounds,
                            per_turn=not self.options.shared_script,
                        )
                    )
                )
                workers = [
                    WorkerProcess(
                        index=i,
                        case=case,
                        url=url,
                        tmp=case_dir,
                        script_path=script_path,
                        poll_s=self.options.poll,
                        stats=not self.options.no_stats,
                        profile_dir=self.options.profile,
                        profiler=self.options.profiler,
                    )
                    for i in range(case.workers)
                ]
                for worker in workers:
                    await worker.wait_started()
                await self.measure(service.database, case, workers, outcome)
            finally:
                stopping = time.monotonic()
                for worker in workers:
                    worker.terminate()
                for worker in workers:
                    outcome.exit_codes.append(await worker.wait_stopped(stopping))
                    if worker.stop_s is not None:
                        outcome.stop_s.append(worker.stop_s)
                await service.close()
            if not outcome.all_good and workers:
                tail = workers[0].log_text()[-1500:]
                print(f"--- {workers[0].log_path.name} (tail)\n{tail}", file=sys.stderr)
        return outcome

    async def populate(self, database: Database, case: Case) -> tuple[datetime, float, float]:
        """Threads, then runs due at T0 (far enough ahead that every insert is done before it):
        (T0, seconds spent inserting, the lead T0 was set ahead by)."""
        started = time.perf_counter()
        now = datetime.now(UTC)
        thread_ids: list[str] = []
        batch = 200
        for first in range(0, case.threads, batch):
            async with database.write() as conn:
                for i in range(first, min(case.threads, first + batch)):
                    thread = await thread_store.create_thread(
                        conn, agent_id=agent_store.DEFAULT_AGENT_ID, now=now, title=f"bench {i}"
                    )
                    thread_ids.append(thread.id)
        threads_s = time.perf_counter() - started
        # Inserting a run costs about what inserting a thread did (an INSERT and a SELECT).
        lead_s = self.options.lead or (1.0 + 2.5 * threads_s * case.runs / case.threads)
        t0 = datetime.now(UTC) + timedelta(seconds=lead_s)
        policy = resolve_policy(Trigger.API)
        for first in range(0, case.runs, batch):
            async with database.write() as conn:
                for i in range(first, min(case.runs, first + batch)):
                    await run_store.create_run(
                        conn,
                        thread_id=thread_ids[i % len(thread_ids)],
                        agent_id=agent_store.DEFAULT_AGENT_ID,
                        trigger=Trigger.API,
                        input=message(case.rounds),
                        policy=policy,
                        now=datetime.now(UTC),
                        requesting_user="bench",
                        execution_user="bench",
                        not_before=t0,
                    )
        if datetime.now(UTC) >= t0:
            raise RuntimeError(
                f"inserting {case.runs} runs took longer than the lead of {lead_s:.1f} s; "
                "pass a longer --lead"
            )
        return t0, time.perf_counter() - started, lead_s

    async def sample(self, database: Database, t0: datetime) -> Sample:
        elapsed = (datetime.now(UTC) - t0).total_seconds()
        async with database.read() as conn:
            rows = (
                await conn.execute(
                    sa.select(runs.c.status, sa.func.count()).group_by(runs.c.status)
                )
            ).all()
            counts = {status: int(count) for status, count in rows}
            sample = Sample(
                t=elapsed,
                running=counts.get(RunStatus.RUNNING.value, 0),
                final=sum(counts.get(s.value, 0) for s in FINAL_RUN_STATUSES),
            )
            if database.dialect == "postgresql":
                row = (
                    await conn.execute(
                        sa.text(
                            "SELECT count(*) FILTER (WHERE datname = current_database()), "
                            "count(*), "
                            "count(*) FILTER (WHERE datname = current_database() "
                            "AND wait_event_type = 'Lock') "
                            "FROM pg_stat_activity "
                            "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
                        )
                    )
                ).one()
                sample.connections, sample.server_connections, sample.lock_waits = (
                    int(v) for v in row
                )
                if sample.lock_waits:
                    waiting = await conn.execute(
                        sa.text(
                            "SELECT left(regexp_replace(query, '\\s+', ' ', 'g'), 70), "
                            "count(*) FROM pg_stat_activity "
                            "WHERE datname = current_database() AND wait_event_type = 'Lock' "
                            "GROUP BY 1"
                        )
                    )
                    sample.waiting = {str(q): int(n) for q, n in waiting.all()}
        return sample

    async def measure(
        self, database: Database, case: Case, workers: list[WorkerProcess], outcome: Outcome
    ) -> None:
        t0, outcome.insert_s, outcome.lead_s = await self.populate(database, case)
        # Counters just before T0 (the workers only poll until then).
        await asyncio.sleep(max(0.0, (t0 - datetime.now(UTC)).total_seconds() - 0.05))
        cpu_before = sum(process_cpu_s(w.pid) for w in workers)
        pg_before = tree_cpu_s(self.postmaster) if case.key == "postgres" else None
        busy_before, total_before = machine_ticks()
        bench_before = own_cpu_s()
        t0_epoch = t0.timestamp()
        await asyncio.sleep(max(0.0, t0_epoch - time.time()))
        deadline = time.monotonic() + self.options.timeout
        while True:
            sample = await self.sample(database, t0)
            outcome.samples.append(sample)
            if sample.final >= case.runs:
                break
            if time.monotonic() > deadline or any(w.process.poll() is not None for w in workers):
                outcome.timed_out = True
                break
            await asyncio.sleep(SAMPLE_S)
        end_epoch = time.time()
        busy_after, total_after = machine_ticks()
        outcome.worker_cpu_s = sum(process_cpu_s(w.pid) for w in workers) - cpu_before
        if pg_before is not None:
            pg_after = tree_cpu_s(self.postmaster)
            outcome.postgres_cpu_s = (pg_after or 0.0) - pg_before
        outcome.machine_busy = (busy_after - busy_before) / max(1, total_after - total_before)
        outcome.bench_cpu_s = own_cpu_s() - bench_before
        outcome.other_cpu_s = (
            (busy_after - busy_before) * CLOCK_TICK_S
            - outcome.worker_cpu_s
            - (outcome.postgres_cpu_s or 0.0)
            - outcome.bench_cpu_s
        )
        for worker in workers:
            peak, now = memory_mb(worker.pid)  # VmHWM just before stopping the worker
            outcome.peak_rss_mb.append(peak)
            outcome.rss_mb.append(now)
        await asyncio.sleep(0.15)  # let each monitor write its last line
        for worker in workers:
            outcome.stats.add(worker.read_stats(t0_epoch, end_epoch))
        async with database.read() as conn:
            rows = (
                await conn.execute(
                    sa.select(
                        runs.c.status,
                        runs.c.started_at,
                        runs.c.finished_at,
                        runs.c.usage,
                        runs.c.attempt,
                    )
                )
            ).all()
        for worker in workers:
            for kind, count in worker.errors().items():
                outcome.log_errors[kind] = outcome.log_errors.get(kind, 0) + count
        for status, started_at, finished_at, usage, attempt in rows:
            outcome.statuses[status] = outcome.statuses.get(status, 0) + 1
            outcome.retried += attempt > 1
            if (usage or {}).get("model_calls") != case.model_calls:
                outcome.wrong_rounds += 1
            if started_at is not None:
                outcome.starts.append((started_at - t0).total_seconds())
            if finished_at is not None:
                outcome.finishes.append((finished_at - t0).total_seconds())
                if started_at is not None:
                    outcome.durations.append((finished_at - started_at).total_seconds())

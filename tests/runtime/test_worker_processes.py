"""Real worker processes, killed and paused, on SQLite and PostgreSQL.

Each test starts `python -m pressloop.runtime.process` (what `pressloop worker` runs) against the
test database, with short leases, and checks the outcome from the database: runs finish, no action
runs twice, no thread is left locked, and a worker that lost its lease writes nothing.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from pressloop.config import Settings
from pressloop.contracts import FINAL_RUN_STATUSES, EventType, RunStatus
from pressloop.providers.scripted import ScriptedProvider
from pressloop.runtime.service import Service
from pressloop.store.schema import runs

ROOT = Path(__file__).resolve().parents[2]
LEASE = {
    "PRESSLOOP_LEASE_TTL": "1.5",
    "PRESSLOOP_LEASE_RENEW": "0.3",
    "PRESSLOOP_WORKER_POLL": "0.1",
}


class Workers:
    def __init__(self, database_url: str, tmp: Path) -> None:
        self.database_url = database_url
        self.tmp = tmp
        self.effects = tmp / "effects.txt"
        self.hang = tmp / "hang"
        self.processes: list[subprocess.Popen[bytes]] = []

    def start(
        self,
        script: list[dict[str, Any]] | dict[str, Any],
        *,
        concurrency: int = 4,
        name: str = "w",
    ) -> subprocess.Popen[bytes]:
        path = self.tmp / f"script-{name}-{len(self.processes)}.json"
        path.write_text(json.dumps(script))
        env = {
            **os.environ,
            **LEASE,
            "PRESSLOOP_DATABASE_URL": self.database_url,
            "PRESSLOOP_DATA_DIR": str(self.tmp),
            "PRESSLOOP_PROVIDER": "scripted",
            "PRESSLOOP_SCRIPT": str(path),
            "PRESSLOOP_ACTION_PACKS": "tests.fixtures.crash_pack",
            "PRESSLOOP_TEST_EFFECTS": str(self.effects),
            "PRESSLOOP_TEST_HANG": str(self.hang),
            "PYTHONPATH": str(ROOT),
        }
        with (self.tmp / f"worker-{name}-{len(self.processes)}.log").open("wb") as log:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "pressloop.runtime.process",
                    "--concurrency",
                    str(concurrency),
                ],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=ROOT,
            )
        self.processes.append(process)
        return process

    def effect_lines(self) -> list[str]:
        return self.effects.read_text().splitlines() if self.effects.exists() else []

    def stop_all(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGCONT)
                process.kill()
            process.wait(10)


@pytest.fixture
async def setup(
    database_url: str, tmp_path: Path, database: object
) -> AsyncIterator[tuple[Service, Workers]]:
    settings = Settings(data_dir=tmp_path, database_url=database_url, provider="scripted")
    service = await Service.open(settings, provider=lambda: ScriptedProvider([]))
    workers = Workers(database_url, tmp_path)
    try:
        yield service, workers
    finally:
        workers.stop_all()
        await service.close()


async def wait_for(check: Callable[[], Any], limit_s: float = 30.0) -> Any:
    deadline = asyncio.get_running_loop().time() + limit_s
    while True:
        value = await check()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {check.__name__}")
        await asyncio.sleep(0.05)


async def pause_outside_a_write(process: subprocess.Popen[bytes], database_url: str) -> None:
    """SIGSTOP the worker at a moment it holds no write lock.

    A process paused inside a SQLite write transaction blocks every other writer until it
    resumes (SQLite has one write lock per file); on PostgreSQL the server ends such a
    transaction after `idle_in_transaction_session_timeout`. This test is about fencing, so it
    pauses the worker between its writes, as a GC pause or a partition usually would.
    """
    for _ in range(100):
        process.send_signal(signal.SIGSTOP)
        if not database_url.startswith("sqlite"):
            return
        try:
            probe = sqlite3.connect(database_url.split("///", 1)[1], timeout=0.2)
            try:
                probe.execute("BEGIN IMMEDIATE")
                probe.execute("ROLLBACK")
                return
            finally:
                probe.close()
        except sqlite3.OperationalError:
            process.send_signal(signal.SIGCONT)
            await asyncio.sleep(0.03)
    raise AssertionError("the worker was always inside a write")


async def running_runs(service: Service) -> int:
    async with service.database.read() as conn:
        return int(
            (
                await conn.execute(
                    sa.select(sa.func.count()).select_from(runs).where(runs.c.status == "running")
                )
            ).scalar_one()
        )


async def test_a_worker_killed_during_a_model_call_is_replaced(
    setup: tuple[Service, Workers],
) -> None:
    service, workers = setup
    thread = await service.create_thread()
    run = (await service.submit(thread.id, "hello")).run
    first = workers.start([{"text": "never finished", "delay_s": 60}], name="a")

    async def started() -> bool:
        return any(e.type is EventType.RUN_STARTED for e in await service.events(run.id))

    await wait_for(started)
    first.kill()  # SIGKILL in the middle of the model call
    workers.start([{"text": "answered by the second worker"}], name="b")

    async def finished() -> Any:
        current = await service.run(run.id)
        return current if current.status in FINAL_RUN_STATUSES else None

    done = await wait_for(finished)
    assert done.status is RunStatus.SUCCEEDED and done.attempt == 2
    assert done.result.assistant_text == "answered by the second worker"
    assert await running_runs(service) == 0
    starts = [e for e in await service.events(run.id) if e.type is EventType.RUN_STARTED]
    assert len(starts) == 2 and starts[0].data["worker"] != starts[1].data["worker"]


async def test_a_worker_killed_between_an_action_and_its_commit(
    setup: tuple[Service, Workers],
) -> None:
    service, workers = setup
    thread = await service.create_thread()
    run = (await service.submit(thread.id, "touch once")).run
    workers.hang.touch()
    first = workers.start(
        [{"tool_calls": [{"name": "touch", "arguments": {"text": "a"}}]}], name="a"
    )

    async def touched() -> bool:
        return len(workers.effect_lines()) == 1

    await wait_for(touched)
    first.kill()  # the effect happened; its outcome never reached the database
    workers.hang.unlink()
    workers.start([{"text": "Touched it once."}], name="b")

    async def finished() -> Any:
        current = await service.run(run.id)
        return current if current.status in FINAL_RUN_STATUSES else None

    done = await wait_for(finished)
    assert done.status is RunStatus.SUCCEEDED
    assert workers.effect_lines() == [f"{run.id}:0:a"]  # not executed twice
    assert done.result.steps[0].result_summary == "found"
    assert await running_runs(service) == 0


async def test_a_paused_worker_cannot_write_after_losing_its_lease(
    setup: tuple[Service, Workers],
) -> None:
    service, workers = setup
    thread = await service.create_thread()
    run = (await service.submit(thread.id, "hello")).run
    zombie = workers.start(
        [{"tool_calls": [{"name": "touch", "arguments": {"text": "zombie"}}], "delay_s": 2}],
        name="zombie",
    )

    async def started() -> bool:
        return any(e.type is EventType.RUN_STARTED for e in await service.events(run.id))

    await wait_for(started)
    await pause_outside_a_write(zombie, workers.database_url)  # mid model call, past its lease
    workers.start([{"text": "the living worker's answer"}], name="b")

    async def finished() -> Any:
        current = await service.run(run.id)
        return current if current.status in FINAL_RUN_STATUSES else None

    await wait_for(finished)
    events_before = await service.events(run.id)
    zombie.send_signal(signal.SIGCONT)  # it wakes up and tries to go on
    await asyncio.sleep(3)
    assert zombie.poll() is None  # still alive, but fenced off
    after = await service.run(run.id)
    assert after.status is RunStatus.SUCCEEDED
    assert after.result.assistant_text == "the living worker's answer"
    assert await service.events(run.id) == events_before  # not one event more
    assert workers.effect_lines() == []  # its action never ran


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
async def test_three_workers_run_300_runs_over_50_threads(
    setup: tuple[Service, Workers],
) -> None:
    service, workers = setup
    threads = [await service.create_thread() for _ in range(50)]
    for i in range(300):
        await service.submit(threads[i % 50].id, f"message {i}")
    # per_turn: each turn gets the call, then the answer, whatever other turns run at once (a
    # cycle shared by 8 concurrent turns could hand one turn nothing but calls until its limit).
    script = {
        "per_turn": True,
        "answers": [{"tool_calls": [{"name": "recall", "arguments": {}}]}, {"text": "ok"}],
    }
    for name in "abc":
        workers.start(script, concurrency=8, name=name)

    async def all_final() -> bool:
        async with service.database.read() as conn:
            left = (
                await conn.execute(
                    sa.select(sa.func.count())
                    .select_from(runs)
                    .where(runs.c.status.not_in([s.value for s in FINAL_RUN_STATUSES]))
                )
            ).scalar_one()
        return left == 0

    await wait_for(all_final, limit_s=240)
    every = await service.list_runs(limit=1000)
    assert len(every) == 300
    unsuccessful = [
        (r.status, r.attempt, r.error) for r in every if r.status is not RunStatus.SUCCEEDED
    ]
    assert unsuccessful == []
    spans: dict[str, list[tuple[Any, Any]]] = {}
    for run in every:
        events = await service.events(run.id)
        starts = [e for e in events if e.type is EventType.RUN_STARTED]
        assert len(starts) == 1  # no run ran twice
        finish = events[-1]
        assert finish.type is EventType.RUN_FINISHED
        spans.setdefault(run.thread_id, []).append((starts[0].ts, finish.ts))
    for thread_spans in spans.values():  # never two running runs on one thread
        ordered = sorted(thread_spans)
        assert all(
            a_end <= b_start for (_, a_end), (b_start, _) in zip(ordered, ordered[1:], strict=False)
        )
    workers_used = {
        e.data["worker"]
        for r in every[:60]
        for e in await service.events(r.id)
        if e.type is EventType.RUN_STARTED
    }
    assert len(workers_used) == 3

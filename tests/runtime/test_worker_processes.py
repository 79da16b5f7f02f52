"""Real worker processes, killed and paused, on SQLite and PostgreSQL.

Each test starts `python -m pressloop.runtime.process` (what `pressloop worker` runs) against the
test database, with short leases (`tests/support/processes.py`), and checks the outcome from the
database: runs finish, no action runs twice, no thread is left locked, and a worker that lost
its lease writes nothing.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import signal
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from pressloop.contracts import FINAL_RUN_STATUSES, EventType, RunStatus
from pressloop.runtime.service import Service
from pressloop.store.schema import runs
from pressloop.store.write_lock import SUFFIX
from tests.support.processes import CrashPackWorkers, wait_for


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
        if _writers_lock_held(Path(database_url.split("///", 1)[1])):
            process.send_signal(signal.SIGCONT)
            await asyncio.sleep(0.03)
            continue
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


def _writers_lock_held(database: Path) -> bool:
    """Whether a process holds the writers' lock of the file (`store/write_lock.py`): taken
    before SQLite's own, so a writer paused between the two blocks the others as well."""
    descriptor = os.open(database.with_name(database.name + SUFFIX), os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(descriptor)  # closing releases our lock if we took it
    return False


async def running_runs(service: Service) -> int:
    async with service.database.read() as conn:
        return int(
            (
                await conn.execute(
                    sa.select(sa.func.count()).select_from(runs).where(runs.c.status == "running")
                )
            ).scalar_one()
        )


async def has_started(service: Service, run_id: str) -> bool:
    return any(e.type is EventType.RUN_STARTED for e in await service.events(run_id))


async def finished_run(service: Service, run_id: str) -> Any:
    """The run once it rests in a final status, else None (for `wait_for`)."""
    current = await service.get_run(run_id)
    return current if current.status in FINAL_RUN_STATUSES else None


async def test_a_worker_killed_during_a_model_call_is_replaced(
    service_and_workers: tuple[Service, CrashPackWorkers],
) -> None:
    service, workers = service_and_workers
    thread = await service.create_thread()
    run = (await service.submit(thread.id, "hello")).run
    first = workers.start([{"text": "never finished", "delay_s": 60}], name="a")

    await wait_for(lambda: has_started(service, run.id), what="the run to start")
    first.kill()  # SIGKILL in the middle of the model call
    workers.start([{"text": "answered by the second worker"}], name="b")

    done = await wait_for(lambda: finished_run(service, run.id), what="the run to finish")
    assert done.status is RunStatus.SUCCEEDED and done.attempt == 2
    assert done.result.assistant_text == "answered by the second worker"
    assert await running_runs(service) == 0
    starts = [e for e in await service.events(run.id) if e.type is EventType.RUN_STARTED]
    assert len(starts) == 2 and starts[0].data["worker"] != starts[1].data["worker"]


async def test_a_worker_killed_between_an_action_and_its_commit(
    service_and_workers: tuple[Service, CrashPackWorkers],
) -> None:
    service, workers = service_and_workers
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
        current = await service.get_run(run.id)
        return current if current.status in FINAL_RUN_STATUSES else None

    done = await wait_for(finished)
    assert done.status is RunStatus.SUCCEEDED
    assert workers.effect_lines() == [f"{run.id}:0:a"]  # not executed twice
    assert done.result.steps[0].result_summary == "found"
    assert await running_runs(service) == 0


async def test_a_paused_worker_cannot_write_after_losing_its_lease(
    service_and_workers: tuple[Service, CrashPackWorkers],
) -> None:
    service, workers = service_and_workers
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
        current = await service.get_run(run.id)
        return current if current.status in FINAL_RUN_STATUSES else None

    await wait_for(finished)
    events_before = await service.events(run.id)
    zombie.send_signal(signal.SIGCONT)  # it wakes up and tries to go on
    await asyncio.sleep(3)
    assert zombie.poll() is None  # still alive, but fenced off
    after = await service.get_run(run.id)
    assert after.status is RunStatus.SUCCEEDED
    assert after.result.assistant_text == "the living worker's answer"
    assert await service.events(run.id) == events_before  # not one event more
    assert workers.effect_lines() == []  # its action never ran


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
async def test_three_workers_run_300_runs_over_50_threads(
    service_and_workers: tuple[Service, CrashPackWorkers],
) -> None:
    service, workers = service_and_workers
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


async def test_a_stopped_worker_hands_its_turns_back_after_the_shutdown_grace(
    service_and_workers: tuple[Service, CrashPackWorkers],
) -> None:
    """SIGTERM: the running turn gets PRESSLOOP_SHUTDOWN_GRACE (here 0.5 s, not the default
    10 s) to finish, is cancelled, and another worker runs it again."""
    service, workers = service_and_workers
    thread = await service.create_thread()
    run = (await service.submit(thread.id, "hello")).run
    grace = {"PRESSLOOP_SHUTDOWN_GRACE": "0.5"}
    first = workers.start([{"text": "never finished", "delay_s": 60}], name="a", env=grace)

    await wait_for(lambda: has_started(service, run.id), what="the run to start")
    began = asyncio.get_running_loop().time()
    first.send_signal(signal.SIGTERM)
    returncode = await asyncio.to_thread(first.wait, 30)
    stopped_after_s = asyncio.get_running_loop().time() - began
    assert returncode == 0
    # The default grace alone is 10 s: the setting was what it waited for.
    assert stopped_after_s < 8.0, stopped_after_s
    workers.start([{"text": "answered by the second worker"}], name="b")

    done = await wait_for(lambda: finished_run(service, run.id), what="the run to finish")
    # Handed back, not failed: a stop costs the run no attempt.
    assert done.status is RunStatus.SUCCEEDED and done.attempt == 1
    assert done.result.assistant_text == "answered by the second worker"
    starts = [e for e in await service.events(run.id) if e.type is EventType.RUN_STARTED]
    assert len(starts) == 2 and starts[0].data["worker"] != starts[1].data["worker"]

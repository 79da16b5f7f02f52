"""`PRESSLOOP_SERVE_RUNS=0`: `pressloop serve` runs no turn; a `pressloop worker` runs them all,
background runs and waited-for ones alike (real processes, one SQLite file); on PostgreSQL the
worker is woken by the API process's commit, not its poll."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

from pressloop.store.db import Database
from tests.conftest import empty_tables
from tests.support.processes import start_pressloop, stop_process, wait_for
from tests.support.serve import Serve


async def test_with_serve_runs_off_a_worker_runs_every_turn(
    cli_env: dict[str, str], tmp_path: Path
) -> None:
    script = tmp_path / "answers.json"
    script.write_text(json.dumps({"cycle": True, "answers": [{"text": "Done."}]}))
    env = {
        **cli_env,
        "PRESSLOOP_SCRIPT": str(script),
        "PRESSLOOP_SERVE_RUNS": "0",
        "PRESSLOOP_WORKER_POLL": "0.1",
    }
    async with Serve(tmp_path, env, "--no-local-wordpress") as server:
        assert "Turns run only in `pressloop worker`s" in server.output()
        log = tmp_path / "worker.log"
        worker = start_pressloop("worker", "--concurrency", "2", env=env, cwd=tmp_path, log=log)
        try:
            owner = f"{socket.gethostname()}:{worker.pid}"
            async with server.client(timeout=30) as client:
                thread = (await client.post("/v1/threads", json={})).json()["id"]
                url = f"/v1/threads/{thread}/runs"
                posted = await client.post(url, json={"message": "remember", "mode": "background"})
                assert posted.status_code == 202 and posted.json()["run"]["status"] == "queued"
                # Queued behind the first, and waited for: both runs are the worker's.
                waited = await client.post(url, json={"message": "and again", "mode": "wait"})
                assert waited.status_code == 200, log.read_text()
                assert waited.json()["run"]["status"] == "succeeded"
                for run_id in (posted.json()["run"]["id"], waited.json()["run"]["id"]):
                    run = (await client.get(f"/v1/runs/{run_id}")).json()
                    assert run["status"] == "succeeded"
                    events = (await client.get(f"/v1/runs/{run_id}/events")).json()
                    assert events[0]["type"] == "run.started"
                    assert events[0]["data"]["worker"] == owner
        finally:
            await asyncio.to_thread(stop_process, worker)


async def test_on_postgresql_a_worker_starts_a_run_queued_elsewhere_at_once(
    cli_env: dict[str, str], tmp_path: Path, postgres_database: str
) -> None:
    """The worker polls only every 30 s here: a turn answered within seconds was started by the
    notification the API process's commit sent (`store/notify.py`), each time it was idle."""
    database = Database.open(postgres_database)  # the session's: empty, so serve makes the
    await empty_tables(database)  # first admin token (its file is how the test gets in)
    await database.close()
    script = tmp_path / "answers.json"
    script.write_text(json.dumps({"cycle": True, "answers": [{"text": "Done."}]}))
    env = {
        **cli_env,
        "PRESSLOOP_DATABASE_URL": postgres_database,
        "PRESSLOOP_SCRIPT": str(script),
        "PRESSLOOP_SERVE_RUNS": "0",
        "PRESSLOOP_WORKER_POLL": "30",
    }
    async with Serve(tmp_path, env, "--no-local-wordpress") as server:
        log = tmp_path / "worker.log"
        worker = start_pressloop("worker", "--concurrency", "2", env=env, cwd=tmp_path, log=log)
        try:

            async def worker_started() -> bool:
                return "started (concurrency 2)" in log.read_text()

            await wait_for(worker_started)
            await asyncio.sleep(1)  # its first look found nothing: it waits for its next poll
            async with server.client(timeout=10) as client:
                for message in ("first", "second"):
                    thread = (await client.post("/v1/threads", json={})).json()["id"]
                    waited = await client.post(
                        f"/v1/threads/{thread}/runs", json={"message": message, "mode": "wait"}
                    )
                    assert waited.status_code == 200, log.read_text()
                    assert waited.json()["run"]["status"] == "succeeded"
                    await asyncio.sleep(1)  # idle again
        finally:
            await asyncio.to_thread(stop_process, worker)

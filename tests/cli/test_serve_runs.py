"""`PRESSLOOP_SERVE_RUNS=0`: `pressloop serve` runs no turn; a `pressloop worker` runs them all,
background runs and waited-for ones alike (real processes, one SQLite file)."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
from pathlib import Path

import httpx

from tests.cli.conftest import command
from tests.cli.test_cli import free_port


async def started(*args: str, env: dict[str, str], cwd: Path) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *command(),
        *args,
        cwd=cwd,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )


async def read_until(process: asyncio.subprocess.Process, text: str) -> str:
    assert process.stdout is not None
    output = ""
    async with asyncio.timeout(30):
        while text not in output:
            line = (await process.stdout.readline()).decode()
            assert line, output
            output += line
    return output


async def stop(process: asyncio.subprocess.Process) -> None:
    if process.returncode is None:
        process.send_signal(signal.SIGTERM)
    async with asyncio.timeout(30):
        await process.communicate()


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
    port = free_port()
    serve = await started(
        "serve", "--port", str(port), "--no-local-wordpress", env=env, cwd=tmp_path
    )
    worker: asyncio.subprocess.Process | None = None
    try:
        output = await read_until(serve, "Uvicorn running")
        assert "Turns run only in `pressloop worker`s" in output
        worker = await started("worker", "--concurrency", "2", env=env, cwd=tmp_path)
        owner = f"{socket.gethostname()}:{worker.pid}"
        token = (tmp_path / "data" / "admin-token").read_text().strip()
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port}",
            headers={"Authorization": f"Bearer {token}"},
            trust_env=False,
            timeout=30,
        ) as client:
            thread = (await client.post("/v1/threads", json={})).json()["id"]
            url = f"/v1/threads/{thread}/runs"
            posted = await client.post(url, json={"message": "remember", "mode": "background"})
            assert posted.status_code == 202 and posted.json()["run"]["status"] == "queued"
            # Queued behind the first, and waited for: both runs are the worker's.
            waited = await client.post(url, json={"message": "and again", "mode": "wait"})
            assert waited.status_code == 200 and waited.json()["run"]["status"] == "succeeded"
            for run_id in (posted.json()["run"]["id"], waited.json()["run"]["id"]):
                run = (await client.get(f"/v1/runs/{run_id}")).json()
                assert run["status"] == "succeeded"
                events = (await client.get(f"/v1/runs/{run_id}/events")).json()
                assert events[0]["type"] == "run.started"
                assert events[0]["data"]["worker"] == owner
    finally:
        await stop(serve)
        if worker is not None:
            await stop(worker)

"""A `pressloop worker`'s own metrics port (PRESSLOOP_METRICS_PORT), and the lease expiry it
counts when it takes over the run of a worker that was killed; `pressloop serve` (running no
turn itself) shows the queue from the database meanwhile. SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest

from pressloop.observability.exposition import private_address
from tests.observability.conftest import metrics_serve, names, scrape, script_file, value
from tests.support.processes import Workers, free_port, wait_for

API = {"trigger": "api"}


async def test_a_worker_counts_the_lease_expiry_of_the_run_it_takes_over(
    database_url: str, database: object, tmp_path: Path
) -> None:
    script = script_file(tmp_path / "unused.json", [])
    server = metrics_serve(tmp_path, database_url, script, PRESSLOOP_SERVE_RUNS="0")
    workers = Workers(database_url, tmp_path)
    try:
        async with server, server.client() as client:
            served = f"{server.url}/metrics"
            thread = (await client.post("/v1/threads", json={})).json()["id"]
            posted = await client.post(
                f"/v1/threads/{thread}/runs", json={"message": "hi", "mode": "background"}
            )
            run_id = posted.json()["run"]["id"]
            await asyncio.sleep(0.3)
            queued = await scrape(served, server.admin_token)
            assert value(queued, "pressloop_queue_depth") == 1
            assert value(queued, "pressloop_queue_oldest_age_seconds") >= 0.2

            first_port, second_port = free_port(), free_port()
            first = workers.start(
                [{"text": "never finished", "delay_s": 60}],
                name="a",
                env={"PRESSLOOP_METRICS_PORT": str(first_port)},
            )

            async def running() -> bool:
                answer = await client.get(f"/v1/runs/{run_id}")
                return bool(answer.json()["status"] == "running")

            await wait_for(running)
            taken = await scrape(f"http://127.0.0.1:{first_port}/metrics")
            assert value(taken, "pressloop_runs_started_total", **API) == 1
            assert value(taken, "pressloop_runs_running") == 0  # the database's: serve's only
            assert "pressloop_queue_depth" not in names(taken)
            assert value((await scrape(served, server.admin_token)), "pressloop_runs_running") == 1

            first.kill()  # its lease expires (1.5 s); the next worker takes the run over
            workers.start(
                [{"text": "answered by the second worker"}],
                name="b",
                env={"PRESSLOOP_METRICS_PORT": str(second_port)},
            )

            async def succeeded() -> bool:
                answer = await client.get(f"/v1/runs/{run_id}")
                return bool(answer.json()["status"] == "succeeded")

            await wait_for(succeeded)
            second = await scrape(f"http://127.0.0.1:{second_port}/metrics")
            assert value(second, "pressloop_lease_expiries_total", outcome="requeued", **API) == 1
            assert value(second, "pressloop_lease_expiries_total", outcome="dead", **API) == 0
            assert value(second, "pressloop_runs_finished_total", status="succeeded", **API) == 1
            assert value(second, "process_resident_memory_bytes") > 0
            after = await scrape(served, server.admin_token)
            assert value(after, "pressloop_queue_depth") == 0
            assert value(after, "pressloop_runs_running") == 0
    finally:
        workers.stop_all()


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_a_lease_that_expires_on_the_last_attempt_counts_a_dead_run(
    database_url: str, database: object, tmp_path: Path
) -> None:
    script = script_file(tmp_path / "unused.json", [])
    settings = {"PRESSLOOP_SERVE_RUNS": "0", "PRESSLOOP_MAX_ATTEMPTS": "1"}
    server = metrics_serve(tmp_path, database_url, script, **settings)
    workers = Workers(database_url, tmp_path, {"PRESSLOOP_MAX_ATTEMPTS": "1"})
    try:
        async with server, server.client() as client:
            thread = (await client.post("/v1/threads", json={})).json()["id"]
            posted = await client.post(
                f"/v1/threads/{thread}/runs", json={"message": "hi", "mode": "background"}
            )
            run_id = posted.json()["run"]["id"]
            first = workers.start([{"text": "never finished", "delay_s": 60}], name="a")

            async def status_is(wanted: str) -> bool:
                answer = await client.get(f"/v1/runs/{run_id}")
                return bool(answer.json()["status"] == wanted)

            await wait_for(lambda: status_is("running"), what="the run to be running")
            first.kill()
            port = free_port()
            workers.start([], name="b", env={"PRESSLOOP_METRICS_PORT": str(port)})
            await wait_for(lambda: status_is("dead"), what="the run to be dead-lettered")
            second = await scrape(f"http://127.0.0.1:{port}/metrics")
            assert value(second, "pressloop_lease_expiries_total", outcome="dead", **API) == 1
            assert value(second, "pressloop_runs_dead_total", reason="lease_expired", **API) == 1
    finally:
        workers.stop_all()


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_a_worker_refuses_to_serve_metrics_on_a_public_address(
    database_url: str, database: object, tmp_path: Path
) -> None:
    workers = Workers(database_url, tmp_path)
    process = workers.start(
        [],
        name="public",
        env={"PRESSLOOP_METRICS_PORT": str(free_port()), "PRESSLOOP_METRICS_HOST": "0.0.0.0"},
    )
    try:
        code = await asyncio.to_thread(process.wait, 60)
    except subprocess.TimeoutExpired:
        workers.stop_all()
        raise
    assert code != 0
    log = (tmp_path / "worker-public-0.log").read_text()
    assert "PRESSLOOP_METRICS_PORT serves metrics without a token" in log, log


def test_which_addresses_are_private() -> None:
    for host in ("127.0.0.1", "::1", "localhost", "10.1.2.3", "192.168.0.9", "fd00::1"):
        assert private_address(host), host
    for host in ("0.0.0.0", "::", "8.8.8.8", "2001:4860::8888", "metrics.example.com"):
        assert not private_address(host), host

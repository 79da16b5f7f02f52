"""`GET /metrics` of a real `pressloop serve` (SQLite and PostgreSQL): it parses with
prometheus_client's own parser, needs an admin token, and each metric moves when what it counts
happens: a run finishing, an approval pending, a retry and a dead run, an open stream, a budget
refusal, the garbage collector's pauses. The serve runs with JSON logs, whose lines carry the
run's ids."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx

from tests.observability.conftest import metrics_serve, names, scrape, script_file, value
from tests.support.processes import ROOT, wait_for
from tests.support.serve import Serve

API = {"trigger": "api"}
SCRIPTED = {"provider": "scripted", "model": "scripted"}

ANSWERS: list[dict[str, Any]] = [
    {"text": "Hello.", "usage": {"input": 10, "output": 5}},  # run 1: succeeds
    {"tool_calls": [{"name": "delete_user", "arguments": {"login": "bob"}}]},  # 2: approval
    {"error": {"status": 503, "message": "the model is down"}},  # 3: retried,
    {"error": {"status": 503, "message": "the model is down"}},  # then dead
    {"text": "Slowly.", "delay_s": 3},  # 4: streamed while it runs
    {"text": "Big.", "usage": {"input": 2000, "output": 0}},  # 5: spends the token budget
]


async def new_thread(client: httpx.AsyncClient) -> str:
    answer = await client.post("/v1/threads", json={})
    assert answer.status_code == 201, answer.text
    return str(answer.json()["id"])


async def post_run(client: httpx.AsyncClient, message: str, mode: str = "wait") -> httpx.Response:
    thread = await new_thread(client)
    return await client.post(f"/v1/threads/{thread}/runs", json={"message": message, "mode": mode})


async def run_status(client: httpx.AsyncClient, run_id: str) -> str:
    return str((await client.get(f"/v1/runs/{run_id}")).json()["status"])


async def test_metrics_move_with_what_they_count(
    database_url: str, database: object, tmp_path: Path
) -> None:
    script = script_file(tmp_path / "answers.json", ANSWERS)
    server = metrics_serve(
        tmp_path,
        database_url,
        script,
        PRESSLOOP_ACTION_PACKS="tests.fixtures.approval_pack",
        PRESSLOOP_TEST_EFFECTS=str(tmp_path / "effects.txt"),
        PYTHONPATH=str(ROOT),
        PRESSLOOP_MAX_ATTEMPTS="2",
        PRESSLOOP_PROVIDER_RETRIES="0",
        PRESSLOOP_BACKOFF_BASE="0.01",
        PRESSLOOP_BACKOFF_CAP="0.05",
        PRESSLOOP_WORKER_POLL="0.1",
        PRESSLOOP_BUDGET_USER_TOKENS="1000",
        PRESSLOOP_LOG_FORMAT="json",
    )
    async with server, server.client(timeout=30) as client:
        url = f"{server.url}/metrics"
        before = await scrape(url, server.admin_token)
        assert {"pressloop_queue_depth", "pressloop_approvals_pending"} <= names(before)
        assert value(before, "pressloop_runs_started_total", **API) == 0
        # Shown at 0 from the start, for alerts.
        assert value(before, "pressloop_runs_dead_total", reason="lease_expired", **API) == 0
        assert "pressloop_runs_dead_total" in names(before)
        assert value(before, "pressloop_budget_refusals_total", stage="new_turn") == 0
        # Start-up settled (runtime/collector.py): its heap frozen, the collections timed.
        assert value(before, "pressloop_gc_frozen_objects") > 10_000

        # A run finishing: started, finished, its duration, the model call and its tokens.
        first = await post_run(client, "hello")
        assert first.json()["run"]["status"] == "succeeded", first.text
        done = await scrape(url, server.admin_token)
        assert value(done, "pressloop_runs_started_total", **API) == 1
        assert value(done, "pressloop_runs_finished_total", status="succeeded", **API) == 1
        assert value(done, "pressloop_run_duration_seconds_count", status="succeeded", **API) == 1
        assert value(done, "pressloop_model_calls_total", outcome="ok", **SCRIPTED) == 1
        assert value(done, "pressloop_model_call_duration_seconds_count", **SCRIPTED) == 1
        assert value(done, "pressloop_model_tokens_total", kind="input", **SCRIPTED) == 10
        assert value(done, "pressloop_model_tokens_total", kind="output", **SCRIPTED) == 5
        assert value(done, "pressloop_approvals_pending") == 0

        # An approval pending: the gauges read from the database, the action's outcome.
        parked = await post_run(client, "delete bob")
        assert parked.json()["run"]["status"] == "waiting_approval", parked.text
        await asyncio.sleep(0.3)
        waiting = await scrape(url, server.admin_token)
        assert value(waiting, "pressloop_approvals_pending") == 1
        assert value(waiting, "pressloop_approvals_oldest_age_seconds") >= 0.2
        assert (
            value(
                waiting,
                "pressloop_action_calls_total",
                action="delete_user",
                outcome="pending_approval",
            )
            == 1
        )
        assert value(waiting, "pressloop_runs_finished_total", status="waiting_approval") == 1

        # A retry, then a dead run (two attempts, the model down both times).
        failing = await post_run(client, "fail", mode="background")
        run_id = failing.json()["run"]["id"]

        async def dead() -> bool:
            return await run_status(client, run_id) == "dead"

        await wait_for(dead)
        died = await scrape(url, server.admin_token)
        assert value(died, "pressloop_run_retries_total", **API) == 1
        assert value(died, "pressloop_runs_dead_total", reason="retries_exhausted", **API) == 1
        assert value(died, "pressloop_runs_finished_total", status="dead", **API) == 1
        assert value(died, "pressloop_run_duration_seconds_count", status="queued", **API) == 1
        assert value(died, "pressloop_model_calls_total", outcome="error", **SCRIPTED) == 2
        assert value(died, "pressloop_runs_started_total", **API) == 4

        # An open event stream, while a slow run runs.
        slow = await post_run(client, "slowly", mode="background")
        slow_id = slow.json()["run"]["id"]
        headers = {"Accept": "text/event-stream"}
        async with client.stream("GET", f"/v1/runs/{slow_id}/events", headers=headers) as stream:
            assert stream.status_code == 200
            streaming = await scrape(url, server.admin_token)
            assert value(streaming, "pressloop_sse_streams_open") == 1
            assert value(streaming, "pressloop_runs_running") == 1
            async for _line in stream.aiter_lines():
                pass  # to the run's end
        ended = await scrape(url, server.admin_token)
        assert value(ended, "pressloop_sse_streams_open") == 0
        assert await run_status(client, slow_id) == "succeeded"

        # A budget refusal: the token budget spent, the next message is refused (429).
        spent = await post_run(client, "spend")
        assert spent.json()["run"]["status"] == "succeeded", spent.text
        refused = await post_run(client, "one more")
        assert refused.status_code == 429, refused.text
        after = await scrape(url, server.admin_token)
        assert value(after, "pressloop_budget_refusals_total", stage="new_turn") == 1
        tokens = {"kind": "input", **SCRIPTED}
        spent_tokens = value(after, "pressloop_model_tokens_total", **tokens) - value(
            ended, "pressloop_model_tokens_total", **tokens
        )
        assert spent_tokens == 2000
        assert value(after, "pressloop_gc_pause_seconds_count", generation="0") > 0

    assert_json_logs(server, first.json()["run"])


def assert_json_logs(server: Serve, run: dict[str, Any]) -> None:
    """Every log line is a JSON object; those of the run carry its ids (rich's lines for a
    person, the addresses and where the token is, are not log lines)."""
    lines = [line for line in server.output().splitlines() if line.startswith("{")]
    records = [json.loads(line) for line in lines]
    assert records, server.output()
    for record in records:
        assert {
            "ts",
            "level",
            "logger",
            "message",
            "run_id",
            "thread_id",
            "trace_id",
            "span_id",
        } <= record.keys(), record
    mine = [r for r in records if r["run_id"] == run["id"]]
    assert mine and all(r["thread_id"] == run["thread_id"] for r in mine), records
    assert any("started" in r["message"] for r in mine), mine
    assert server.admin_token not in server.output()


async def test_metrics_need_an_admin_token(tmp_path: Path) -> None:
    script = script_file(tmp_path / "answers.json", [])
    server = metrics_serve(tmp_path, f"sqlite+aiosqlite:///{tmp_path / 'p.db'}", script)
    async with server, server.client() as client:
        assert (await client.get("/metrics")).status_code == 200
        made = await client.post("/v1/tokens", json={"name": "ops", "role": "operator"})
        assert made.status_code == 201, made.text
        operator = made.json()["token"]
        async with httpx.AsyncClient(base_url=server.url, trust_env=False) as anonymous:
            assert (await anonymous.get("/metrics")).status_code == 401
            wrong = await anonymous.get("/metrics", headers={"Authorization": "Bearer plt_nope"})
            assert wrong.status_code == 401
            as_operator = await anonymous.get(
                "/metrics", headers={"Authorization": f"Bearer {operator}"}
            )
            assert as_operator.status_code == 403
            assert as_operator.json()["error"]["code"] == "forbidden"


async def test_public_metrics_only_on_a_private_address(tmp_path: Path) -> None:
    script = script_file(tmp_path / "answers.json", [])
    database = f"sqlite+aiosqlite:///{tmp_path / 'p.db'}"
    public = metrics_serve(tmp_path, database, script, PRESSLOOP_METRICS_PUBLIC="1")
    async with public:
        async with httpx.AsyncClient(trust_env=False) as anonymous:
            answer = await anonymous.get(f"{public.url}/metrics")
        assert answer.status_code == 200
        assert "pressloop_queue_depth" in answer.text

    everywhere = metrics_serve(tmp_path, database, script, PRESSLOOP_METRICS_PUBLIC="1")
    everywhere.args = (*everywhere.args, "--host", "0.0.0.0")
    process = everywhere.launch()
    code = await asyncio.to_thread(process.wait, 60)
    assert code != 0
    assert "PRESSLOOP_METRICS_PUBLIC serves metrics without a token" in everywhere.output()
    assert "'0.0.0.0' is not one" in everywhere.output()

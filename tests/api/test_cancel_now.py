"""Cancel and interrupt through the HTTP API (a real uvicorn), on SQLite and PostgreSQL: the model
answer or the action in flight is stopped at once, the run ends `cancelled` with every tool call
answered, and an interrupting message starts at once. Timings are printed, not asserted tightly.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from pressloop.api import create_app
from pressloop.config import Settings
from pressloop.runtime.service import Service
from tests.api.conftest import ApiFactory, _serve
from tests.conftest import FakeClock
from tests.wire.fixtures import openai_server, openai_server_session  # noqa: F401
from tests.wire.openai_server import FakeOpenAIServer
from tests.wire.scripted_server import Reply


class Stall:
    """A local web page that answers only when the test lets it (never, here)."""

    def __init__(self) -> None:
        self.asked = threading.Event()
        self.release = threading.Event()
        stall = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
                stall.asked.set()
                stall.release.wait(30)
                with contextlib.suppress(OSError):  # the fetch was cancelled: nobody listens
                    self.send_response(200)
                    self.send_header("Content-Type", "text/plain")
                    self.end_headers()
                    self.wfile.write(b"late")

            def log_message(self, *_args: object) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/slow"


@pytest.fixture
def stall() -> Iterator[Stall]:
    page = Stall()
    thread = threading.Thread(target=page.server.serve_forever, daemon=True)
    thread.start()
    yield page
    page.release.set()
    page.server.shutdown()
    page.server.server_close()


@pytest.fixture
async def wire_api(
    database_url: str,
    tmp_path: Path,
    clock: FakeClock,
    database: object,
    openai_server: FakeOpenAIServer,  # noqa: F811
) -> AsyncIterator[tuple[httpx.AsyncClient, Service]]:
    """The API served by uvicorn over a Service whose model is the fake OpenAI server."""
    settings = Settings(
        data_dir=tmp_path,
        database_url=database_url,
        provider="openai-compatible",
        base_url=openai_server.base_url,
        model="fake-model",
    )
    service = await Service.open(settings, now=clock)
    _record, token = await service.create_token(name="operator", role="operator")
    server, task, port = await _serve(create_app(service))
    client = httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{port}",
        timeout=20,
        trust_env=False,
        headers={"Authorization": f"Bearer {token}"},
    )
    try:
        yield client, service
    finally:
        await client.aclose()
        server.should_exit = True
        await task
        await service.close()


async def wait_until(check: Any, limit_s: float = 10.0) -> None:
    deadline = time.monotonic() + limit_s
    while not await check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


async def test_cancel_during_a_slow_model_answer_over_the_wire(
    wire_api: tuple[httpx.AsyncClient, Service],
    openai_server: FakeOpenAIServer,  # noqa: F811
) -> None:
    client, _service = wire_api
    openai_server.push(Reply(text="far too late", delay_s=30))
    thread = (await client.post("/v1/threads", json={})).json()["id"]
    posted = await client.post(
        f"/v1/threads/{thread}/runs", json={"message": "think hard", "mode": "background"}
    )
    run_id = posted.json()["run"]["id"]

    async def asked() -> bool:
        return len(openai_server.requests) == 1

    await wait_until(asked)  # the model call is in flight (its answer comes in 30 s)
    started = time.monotonic()
    answer = await client.post(f"/v1/runs/{run_id}/cancel")
    answered = time.monotonic() - started
    shown = (await client.get(f"/v1/runs/{run_id}")).json()
    seen = time.monotonic() - started
    print(f"cancel during a model call: answer {answered:.3f} s, GET cancelled {seen:.3f} s")
    assert answer.status_code == 200 and answer.json()["status"] == "cancelled"
    assert shown["status"] == "cancelled" and shown["result"]["status"] == "cancelled"
    assert seen < 5, seen
    events = (await client.get(f"/v1/runs/{run_id}/events")).json()
    assert events[-1]["type"] == "run.finished" and events[-1]["data"]["status"] == "cancelled"


async def test_interrupt_during_a_slow_web_fetch_starts_the_new_run_at_once(
    make_api: ApiFactory, stall: Stall
) -> None:
    api = await make_api(
        [
            {"tool_calls": [{"name": "web_fetch", "arguments": {"url": stall.url}}]},
            {"text": "Answering the new question right away."},
        ],
        server=True,
        web_fetch_allow_private=True,
    )
    thread = await api.thread()
    url = f"/v1/threads/{thread}/runs"
    first = await api.client.post(
        url, json={"message": "read that page", "mode": "background"}, headers=api.auth()
    )
    first_id = first.json()["run"]["id"]
    assert await asyncio.to_thread(stall.asked.wait, 10)  # web_fetch waits on the page

    started = time.monotonic()
    second = await api.client.post(
        url,
        json={"message": "forget it: new question", "multitask": "interrupt"},
        headers=api.auth(),
    )
    took = time.monotonic() - started
    print(f"interrupt during web_fetch: the new run answered after {took:.3f} s")
    assert second.status_code == 200, second.text
    assert second.json()["run"]["status"] == "succeeded"
    assert second.json()["result"]["assistant_text"] == "Answering the new question right away."
    assert took < 5, took

    old = (await api.client.get(f"/v1/runs/{first_id}", headers=api.auth())).json()
    assert old["status"] == "cancelled"
    (step,) = old["result"]["steps"]
    assert step["action"] == "web_fetch" and step["status"] == "cancelled"
    detail = (await api.client.get(f"/v1/threads/{thread}", headers=api.auth())).json()
    calls = [c["id"] for m in detail["messages"] for c in m.get("tool_calls") or []]
    answered = [m["tool_call_id"] for m in detail["messages"] if m["role"] == "tool"]
    assert calls and sorted(calls) == sorted(answered)

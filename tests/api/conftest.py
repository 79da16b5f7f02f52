"""The real app over a real Service (SQLite and PostgreSQL), reached in-process or over HTTP.

`make_api(script)` builds a Service with a scripted model, three API tokens (admin, operator,
viewer) and the app `pressloop serve` serves (the API with the UI mounted); `server=True` serves
it with a real uvicorn on 127.0.0.1 (needed for SSE: httpx's in-process transport does not
stream). Script items with `delay_s` block until the test opens `api.gate`, so a test can hold a
run in the middle deterministically.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from pressloop.api import create_app
from pressloop.config import Settings
from pressloop.providers.scripted import ScriptedProvider
from pressloop.runtime.service import Service
from pressloop.ui import mount_ui
from tests.conftest import FakeClock

ROLES = ("admin", "operator", "viewer")

REMEMBER_THEN_ANSWER: list[dict[str, Any]] = [
    {"tool_calls": [{"name": "remember", "arguments": {"content": "The owner likes teal."}}]},
    {"text": "Noted: you like teal."},
]


class Gate:
    """The scripted model's sleep: a `delay_s` item waits here until the test opens the gate."""

    def __init__(self) -> None:
        self.opened = asyncio.Event()
        self.reached = asyncio.Event()

    async def sleep(self, _seconds: float) -> None:
        self.reached.set()
        await self.opened.wait()

    def open(self) -> None:
        self.opened.set()


@dataclass(kw_only=True)
class Api:
    service: Service
    app: FastAPI
    client: httpx.AsyncClient
    scripted: ScriptedProvider
    gate: Gate
    tokens: dict[str, str] = field(default_factory=dict)

    def auth(self, role: str = "operator") -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[role]}"}

    async def thread(self) -> str:
        response = await self.client.post("/v1/threads", json={}, headers=self.auth())
        assert response.status_code == 201, response.text
        return str(response.json()["id"])


@dataclass(kw_only=True)
class Frame:
    # The seq; `"N.k"` (text) on a text delta sent before its commit (event N, then part k).
    id: int | str | None
    event: str | None
    data: dict[str, Any] = field(default_factory=dict)  # the Event; empty for a comment
    comment: str | None = None
    retry: int | None = None  # the reconnection delay the server asked for (ms)


async def read_frames(
    source: httpx.Response | AsyncIterator[str],
    *,
    until: Callable[[Frame], bool] | None = None,
) -> list[Frame]:
    """Parse SSE frames (comments included) until the stream ends or `until(frame)` holds.

    To go on reading the same response later, pass one `response.aiter_lines()` iterator.
    """
    lines = source.aiter_lines() if isinstance(source, httpx.Response) else source
    frames: list[Frame] = []
    fields: dict[str, str] = {}
    comments: list[str] = []
    async for line in lines:
        if line.startswith(":"):
            comments.append(line[1:].strip())
            continue
        if line:
            name, _, value = line.partition(":")
            fields[name] = fields.get(name, "") + value.removeprefix(" ")
            continue
        if not fields and not comments:
            continue
        frame = Frame(
            id=_frame_id(fields["id"]) if "id" in fields else None,
            event=fields.get("event"),
            data=json.loads(fields["data"]) if "data" in fields else {},
            comment="\n".join(comments) or None,
            retry=int(fields["retry"]) if "retry" in fields else None,
        )
        frames.append(frame)
        fields, comments = {}, []
        if until is not None and until(frame):
            break
    return frames


def _frame_id(value: str) -> int | str:
    return int(value) if value.isdigit() else value


def events_only(frames: list[Frame]) -> list[Frame]:
    return [f for f in frames if f.id is not None]


def text_of(frames: list[Frame]) -> str:
    """The text the frames carry: their parts, committed deltas and rests, in order."""
    return "".join(f.data["data"].get("delta", "") for f in frames if f.event == "message")


def whole_events(frames: list[Frame]) -> list[tuple[int, str]]:
    """(seq, type) of each frame that is no text delta."""
    return [(f.data["seq"], f.data["type"]) for f in frames if "delta" not in f.data["data"]]


def stored_whole(stored: list[dict[str, Any]]) -> list[tuple[int, str]]:
    """(seq, type) of each stored event that is no text delta."""
    return [(e["seq"], e["type"]) for e in stored if "delta" not in e["data"]]


def folded(frames: list[Frame]) -> list[dict[str, Any]]:
    """The events the frames carry, as stored: the text delta parts sent before their commit
    (frames with `data.after` and `data.part`) joined into the event of their seq."""
    events: list[dict[str, Any]] = []
    lengths: list[int] = []
    for frame in frames:
        data = frame.data["data"]
        if "part" not in data:
            events.append(frame.data)
            lengths = []
            continue
        if not lengths or events[-1]["seq"] != frame.data["seq"]:
            events.append({**frame.data, "data": {"delta": data["delta"]}})
            lengths = [len(data["delta"])]
            continue
        lengths.append(len(data["delta"]))
        joined = events[-1]["data"]["delta"] + data["delta"]
        events[-1] = {**events[-1], "data": {"delta": joined, "parts": list(lengths)}}
    return events


ApiFactory = Callable[..., Awaitable[Api]]


async def _serve(app: FastAPI) -> tuple[uvicorn.Server, asyncio.Task[None], int]:
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=0,
        log_config=None,
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=5,
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(), name="uvicorn")
    async with asyncio.timeout(10):
        while not server.started:
            if task.done():
                await task
                raise RuntimeError("uvicorn stopped during startup")
            await asyncio.sleep(0.005)
    port = int(server.servers[0].sockets[0].getsockname()[1])
    return server, task, port


@pytest.fixture
async def make_api(
    database_url: str, tmp_path: Path, clock: FakeClock, database: object
) -> AsyncIterator[ApiFactory]:
    """Depends on `database` so the schema exists (SQLite) or tables are emptied (PostgreSQL)."""
    cleanups: list[Callable[[], Awaitable[None]]] = []

    async def build(
        script: list[dict[str, Any]] | None = None,
        *,
        server: bool = False,
        run_worker: bool = False,
        sse_ping_s: float = 15.0,
        max_body_bytes: int | None = None,
        **overrides: Any,
    ) -> Api:
        gate = Gate()
        provider = ScriptedProvider(
            script if script is not None else REMEMBER_THEN_ANSWER, sleep=gate.sleep
        )
        settings = Settings(
            data_dir=tmp_path, database_url=database_url, provider="scripted", **overrides
        )
        service = await Service.open(settings, provider=lambda: provider, now=clock)
        cleanups.append(service.close)
        tokens = {}
        for role in ROLES:
            _record, tokens[role] = await service.create_token(name=f"{role}-user", role=role)
        app = mount_ui(
            create_app(
                service, run_worker=run_worker, sse_ping_s=sse_ping_s, max_body_bytes=max_body_bytes
            )
        )
        if server:
            uvicorn_server, task, port = await _serve(app)

            async def stop() -> None:
                uvicorn_server.should_exit = True
                await task

            cleanups.append(stop)
            client = httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{port}", timeout=20, trust_env=False
            )
        else:
            transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
            client = httpx.AsyncClient(transport=transport, base_url="http://pressloop.test")
        cleanups.append(client.aclose)
        return Api(
            service=service, app=app, client=client, scripted=provider, gate=gate, tokens=tokens
        )

    yield build
    for cleanup in reversed(cleanups):
        await cleanup()

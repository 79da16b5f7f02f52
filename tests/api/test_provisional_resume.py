"""Text deltas before their commit, over HTTP and across real processes, on both databases.

- A stream served by the process running the turn gets the deltas while their commit is held
  (`N.k` ids); a client that drops there and reconnects to another `pressloop serve` with
  `Last-Event-ID: N.k` gets the rest exactly: the text seen plus the text resumed is the answer,
  and every other event comes once. A plain seq still resumes as before.
- A `pressloop serve` killed while its deltas wait for the database (the test holds the write
  lock) never commits them; another process retries the run, and the client reconnecting there
  with the `N.k` it had gets the retry's events whole, from its `run.started`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from sse_starlette import ServerSentEvent

from pressloop.api.sse_now import FrameWriter
from pressloop.store.schema import metadata
from tests.api.conftest import (
    Api,
    ApiFactory,
    Frame,
    events_only,
    folded,
    read_frames,
    stored_whole,
    text_of,
    whole_events,
)
from tests.support.locks import sqlite_write_lock
from tests.support.processes import LEASE
from tests.support.serve import Serve, serve_env

SSE = {"Accept": "text/event-stream"}
ANSWER = "The first answer streams in many small pieces, sixteen characters at a time."
RETRY_ANSWER = "The retry's own answer."


def is_part(frame: Frame) -> bool:
    return isinstance(frame.id, str)


class HeldCommits:
    """Holds the in-process service's group committer before its next transaction."""

    def __init__(self, api: Api, monkeypatch: pytest.MonkeyPatch, *, hold: bool = True) -> None:
        committer = api.service.runner.committer
        self.original: Callable[..., Awaitable[Any]] = committer._transaction
        self.released = asyncio.Event()
        self.holding = hold
        monkeypatch.setattr(committer, "_transaction", self._held)

    def hold(self) -> None:
        self.holding = True

    async def _held(self, batch: Any) -> Any:
        if self.holding:
            await self.released.wait()
        return await self.original(batch)


async def _frames(
    base_url: str,
    run_id: str,
    token: str,
    *,
    last_event_id: str | None = None,
    until: Callable[[Frame], bool] | None = None,
) -> list[Frame]:
    headers = {"Authorization": f"Bearer {token}", **SSE}
    if last_event_id is not None:
        headers["Last-Event-ID"] = last_event_id
    async with (
        httpx.AsyncClient(base_url=base_url, timeout=30, trust_env=False) as client,
        client.stream("GET", f"/v1/runs/{run_id}/events", headers=headers) as response,
    ):
        assert response.status_code == 200, await response.aread()
        return events_only(await read_frames(response, until=until))


def _other_serve(
    tmp_path: Path,
    name: str,
    database_url: str,
    answers: list[dict[str, Any]] | None = None,
    **settings: str,
) -> Serve:
    """Another `pressloop serve` on the test's database (its own data directory)."""
    home = tmp_path / name
    home.mkdir()
    script = home / "script.json"
    script.write_text(json.dumps(answers or []))
    env = serve_env(home / "data", script, PRESSLOOP_DATABASE_URL=database_url, **settings)
    return Serve(home, env, "--no-local-wordpress")


@contextlib.asynccontextmanager
async def database_writes_held(database_url: str) -> AsyncIterator[None]:
    """Hold the database's write lock (SQLite) or the event table's (PostgreSQL) from this
    process: another process's commit waits for it; reads go on."""
    if database_url.startswith("sqlite"):
        with sqlite_write_lock(database_url):
            yield
        return
    conn = await asyncpg.connect(database_url.replace("+asyncpg", ""), timeout=10)
    try:
        await conn.execute("BEGIN")
        await conn.execute("LOCK TABLE run_events IN EXCLUSIVE MODE")
        yield
        await conn.execute("ROLLBACK")
    finally:
        await conn.close()


async def test_a_reconnect_at_a_delta_to_another_process_resumes_exactly(
    make_api: ApiFactory, database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = await make_api([{"text": ANSWER, "delay_s": 1}], server=True)
    thread_id = await api.thread()
    run = (
        await api.client.post(
            f"/v1/threads/{thread_id}/runs",
            json={"message": "hi", "mode": "background"},
            headers=api.auth(),
        )
    ).json()["run"]
    viewer = api.tokens["viewer"]
    base = str(api.client.base_url)
    # Which frames the turn's task wrote itself (`sse_now.py`), the server's path for a delta
    # when the stream waits: observed, not changed.
    written_by_the_turn: list[str] = []
    send_now = FrameWriter.send_now

    def observed(writer: FrameWriter, frame: ServerSentEvent) -> bool:
        sent = send_now(writer, frame)
        if sent:
            written_by_the_turn.append(str(frame.id))
        return sent

    monkeypatch.setattr(FrameWriter, "send_now", observed)

    held = HeldCommits(api, monkeypatch, hold=False)
    try:
        async with (
            asyncio.timeout(20),
            httpx.AsyncClient(base_url=base, timeout=30, trust_env=False) as client,
            client.stream(
                "GET",
                f"/v1/runs/{run['id']}/events",
                headers={"Authorization": f"Bearer {viewer}", **SSE},
            ) as response,
        ):
            lines = response.aiter_lines()
            first = events_only(await read_frames(lines, until=lambda f: f.event == "run.started"))
            await api.gate.reached.wait()
            held.hold()
            api.gate.open()  # the model streams its answer; nothing more can be committed
            first += events_only(await read_frames(lines, until=lambda f: f.id == "1.2"))
        # The client saw two deltas that are in no database yet, then dropped the connection.
        assert [f.id for f in first] == [1, "1.1", "1.2"]
        assert written_by_the_turn[:2] == ["1.1", "1.2"]
        listed = await api.client.get(f"/v1/runs/{run['id']}/events", headers=api.auth())
        assert [e["seq"] for e in listed.json()] == [1]
    finally:
        held.released.set()
    finished = await api.service.wait(run["id"])
    assert finished.status.value == "succeeded"
    stored = (await api.client.get(f"/v1/runs/{run['id']}/events", headers=api.auth())).json()
    assert stored[1]["data"]["parts"][:2] == [16, 16]  # the parts merged while held

    async with _other_serve(tmp_path, "b", database_url, PRESSLOOP_SERVE_RUNS="0") as other:
        resumed = await _frames(other.url, run["id"], viewer, last_event_id="1.2")
        # Exact: the text seen plus the text resumed is the answer; every other event once.
        assert resumed[0].data["data"] == {"delta": ANSWER[32:], "after_part": 2}
        assert text_of(first) + text_of(resumed) == ANSWER
        assert whole_events(first) + whole_events(resumed) == stored_whole(stored)
        assert resumed[-1].event == "run.finished"
        # After every part of the delta event: nothing of it; a plain seq: as before.
        parts = len(stored[1]["data"]["parts"])
        everything = await _frames(other.url, run["id"], viewer, last_event_id=f"1.{parts}")
        assert text_of(everything) == "" and whole_events(everything) == stored_whole(stored)[1:]
        plain = await _frames(other.url, run["id"], viewer, last_event_id="2")
        assert [f.data for f in plain] == stored[2:]


async def _stored(database_url: str, run_id: str) -> list[dict[str, Any]]:
    """The run's stored events, read with a connection of its own (this process keeps no
    SQLite connection open while the servers write: see the test below)."""
    if database_url.startswith("sqlite"):
        path = database_url.split(":///", 1)[1]
        with contextlib.closing(sqlite3.connect(path)) as conn:
            rows = conn.execute(
                "SELECT seq, type, data FROM run_events WHERE run_id = ? ORDER BY seq", (run_id,)
            ).fetchall()
        return [{"seq": seq, "type": type_, "data": json.loads(data)} for seq, type_, data in rows]
    conn = await asyncpg.connect(database_url.replace("+asyncpg", ""), timeout=10)
    try:
        rows = await conn.fetch(
            "SELECT seq, type, data FROM run_events WHERE run_id = $1 ORDER BY seq", run_id
        )
    finally:
        await conn.close()
    return [{"seq": r["seq"], "type": r["type"], "data": json.loads(r["data"])} for r in rows]


async def test_a_killed_worker_s_deltas_are_followed_by_the_retry(
    database_url: str, tmp_path: Path
) -> None:
    if not database_url.startswith("sqlite"):  # PostgreSQL: the tables emptied
        conn = await asyncpg.connect(database_url.replace("+asyncpg", ""), timeout=10)
        try:
            names = ", ".join(t.name for t in metadata.sorted_tables)
            await conn.execute(f"TRUNCATE {names} RESTART IDENTITY CASCADE")
        finally:
            await conn.close()
    # On SQLite the servers make the file and this process opens no Service on it: a second
    # `Database.open` in a process with open connections (the fixtures' and the app's) closes a
    # descriptor of the file (`private_sqlite`), which drops the process's POSIX locks, and the
    # servers' writes were then lost to it (seen on main as "database disk image is malformed").
    settings = {**LEASE, "PRESSLOOP_DB_BUSY_TIMEOUT": "60"}
    first_server = _other_serve(
        tmp_path, "a", database_url, [{"text": ANSWER, "delay_s": 1.5}], **settings
    )
    async with first_server as first_process, first_process.client() as client:
        token = first_process.admin_token
        thread_id = (await client.post("/v1/threads", json={})).json()["id"]
        run = (
            await client.post(
                f"/v1/threads/{thread_id}/runs", json={"message": "hi", "mode": "background"}
            )
        ).json()["run"]
        async with client.stream("GET", f"/v1/runs/{run['id']}/events", headers=SSE) as response:
            lines = response.aiter_lines()
            seen = events_only(await read_frames(lines, until=lambda f: f.event == "run.started"))
            async with database_writes_held(database_url):
                # The model answers 1.5 s after the start: its deltas reach the client while
                # nothing can be written; then the worker dies.
                async with asyncio.timeout(20):
                    seen += events_only(await read_frames(lines, until=lambda f: f.id == "1.2"))
                assert first_process.process is not None
                first_process.process.kill()
                first_process.process.wait()
    assert [f.id for f in seen] == [1, "1.1", "1.2"]
    assert [e["seq"] for e in await _stored(database_url, run["id"])] == [1]  # never committed

    retry_server = _other_serve(tmp_path, "b", database_url, [{"text": RETRY_ANSWER}], **settings)
    async with retry_server as retry_process:
        resumed = await _frames(retry_process.url, run["id"], token, last_event_id="1.2")

    # The retry's events, whole, from its run.started: the dead attempt's text is not repeated
    # (it is in no database), and the retry's text comes in full after it.
    assert resumed[0].event == "run.started" and resumed[0].id == 2
    # Its attempt is the second, or the third on PostgreSQL: a group commit there is one
    # statement (store/batch_writes.py), which waits for the held table before it locks the
    # run's row; the dead process's lease renewal, stuck behind the lock, holds nothing, so its
    # lease (1.5 s) can run out during the hold and the process claim the next attempt before
    # it is killed (whose run.started waits behind the stuck renewal, never committed).
    assert resumed[0].data["data"]["attempt"] in (2, 3)
    assert text_of(resumed) == RETRY_ANSWER
    stored = await _stored(database_url, run["id"])
    assert [(e["seq"], e["type"], e["data"]) for e in folded(resumed)] == [
        (e["seq"], e["type"], e["data"]) for e in stored[1:]
    ]
    assert resumed[-1].event == "run.finished"
    assert resumed[-1].data["data"]["status"] == "succeeded"


async def test_last_event_id_is_a_seq_or_a_position_after_one(make_api: ApiFactory) -> None:
    api = await make_api()
    thread_id = await api.thread()
    posted = await api.client.post(
        f"/v1/threads/{thread_id}/runs", json={"message": "Remember teal"}, headers=api.auth()
    )
    run_id = posted.json()["run"]["id"]
    for bad in ["1.0", "1.", ".1", "01.1", "1.01", "1.2.3", "2147483648.1", "1.1000000000"]:
        answer = await api.client.get(
            f"/v1/runs/{run_id}/events",
            headers={**api.auth(), **SSE, "Last-Event-ID": bad},
        )
        assert answer.status_code == 422, bad
    schema = (await api.client.get("/openapi.json")).json()
    parameters = schema["paths"]["/v1/runs/{run_id}/events"]["get"]["parameters"]
    header = next(p for p in parameters if p["name"] == "Last-Event-ID")
    assert "N.k" in header["description"]

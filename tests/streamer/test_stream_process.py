"""A real `pressloop serve` (one serving process, `PRESSLOOP_STREAM_PROCESS` unset: on) hands a
submitted run's stream to its stream process, whose model calls go through it to a server
speaking OpenAI's real wire protocol; on both databases.

- The stream carries the answer's parts before their commit (`N.k`: with a stream process the
  serving process makes none itself), then every event once; the connection stays alive for the
  next request; the provider got the call as the SDK sent it, nothing of the relay's own.
- A client that drops after a part and reconnects to another `pressloop serve` with that
  `Last-Event-ID` gets the rest exactly.
- A stream process that is gone costs no run: the serving process calls the model itself and
  streams the run as it would without one; so does one turned off (`PRESSLOOP_STREAM_PROCESS=0`).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path

import httpx
import pytest

from tests.api.conftest import (
    Frame,
    events_only,
    read_frames,
    stored_whole,
    text_of,
    whole_events,
)
from tests.support.serve import Serve, serve_env
from tests.wire.fixtures import openai_server, openai_server_session  # noqa: F401
from tests.wire.openai_server import FakeOpenAIServer
from tests.wire.scripted_server import Reply

SSE = {"Accept": "text/event-stream"}
ANSWER = "The stream process writes these words as the model sends them, one piece at a time."
PIECES = tuple(ANSWER[i : i + 7] for i in range(0, len(ANSWER), 7))


# How long the fake model thinks before it answers.
THINKING_S = 1.5


def _serve(
    tmp_path: Path, name: str, database_url: str, model: FakeOpenAIServer, **settings: str
) -> Serve:
    home = tmp_path / name
    home.mkdir()
    env = serve_env(
        home / "data",
        PRESSLOOP_DATABASE_URL=database_url,
        PRESSLOOP_PROVIDER="openai-compatible",
        PRESSLOOP_BASE_URL=model.base_url,
        OPENAI_API_KEY="sk-test-relayed",
        **settings,
    )
    return Serve(home, env, "--no-local-wordpress")


async def _submit_streamed(
    client: httpx.AsyncClient, token: str, *, until: str | None = None
) -> list[Frame]:
    auth = {"Authorization": f"Bearer {token}"}
    thread = (await client.post("/v1/threads", json={}, headers=auth)).json()["id"]
    async with client.stream(
        "POST",
        f"/v1/threads/{thread}/runs",
        json={"message": "hello", "mode": "stream"},
        headers={**auth, **SSE},
    ) as response:
        assert response.status_code == 200, await response.aread()
        stop = (lambda f: f.id == until) if until else None
        return events_only(await read_frames(response, until=stop))


async def test_the_stream_process_writes_the_parts_and_a_reconnect_resumes_exactly(
    database_url: str,
    database: object,
    tmp_path: Path,
    openai_server: FakeOpenAIServer,  # noqa: F811
) -> None:
    # Two answers: one streamed whole, one dropped after a part (a delay first, so the stream
    # is handed over, and the events before the call reach the stream process, while the model
    # thinks, as with a real model: with 0.3 s the whole answer was once committed first on a
    # machine loaded by the rest of the suite, and its text came with the commits, no parts).
    openai_server.push(
        Reply(text=ANSWER, deltas=PIECES, delay_s=THINKING_S),
        Reply(text=ANSWER, deltas=PIECES, delay_s=THINKING_S),
    )
    with _serve(tmp_path, "a", database_url, openai_server) as a:  # on by default
        assert len(a.stream_processes()) == 1
        async with httpx.AsyncClient(base_url=a.url, timeout=30, trust_env=False) as client:
            frames = await _submit_streamed(client, a.admin_token)
            parts = [f for f in frames if isinstance(f.id, str)]
            # Before their commit, from the stream process (the serving process makes no parts
            # for a stream it handed over), one a chunk of the model's answer.
            assert [p.data["data"]["delta"] for p in parts] == list(PIECES)
            assert text_of(frames) == ANSWER
            assert frames[-1].event == "run.finished"
            # The same kept-alive connection serves the next request.
            assert (await client.get("/healthz")).status_code == 200
            run_id = frames[0].data["run_id"]
            auth = {"Authorization": f"Bearer {a.admin_token}"}
            stored = (await client.get(f"/v1/runs/{run_id}/events", headers=auth)).json()
            assert whole_events(frames) == stored_whole(stored)

            cut = parts[3].id  # the client drops after the fourth part
            token = a.admin_token
            first = await _submit_streamed(client, a.admin_token, until=str(cut))
            second_run = first[0].data["run_id"]
            finished = await client.get(f"/v1/runs/{second_run}", headers=auth)
            for _ in range(100):
                if finished.json()["status"] == "succeeded":
                    break
                finished = await client.get(f"/v1/runs/{second_run}", headers=auth)
        relayed = openai_server.requests
        assert [r.path for r in relayed] == ["/v1/chat/completions"] * 2
        assert relayed[0].headers["authorization"] == "Bearer sk-test-relayed"
        assert not any(k.lower().startswith("x-pressloop") for k in relayed[0].headers)
        assert first[-1].id == cut and text_of(first) == ANSWER[: 4 * 7]

    with _serve(tmp_path, "b", database_url, openai_server, PRESSLOOP_SERVE_RUNS="0") as b:
        async with httpx.AsyncClient(base_url=b.url, timeout=30, trust_env=False) as client:
            headers = {"Authorization": f"Bearer {token}", "Last-Event-ID": str(cut)}
            async with client.stream(
                "GET", f"/v1/runs/{second_run}/events", headers={**headers, **SSE}
            ) as response:
                resumed = events_only(await read_frames(response))
            stored = (
                await client.get(
                    f"/v1/runs/{second_run}/events",
                    headers={"Authorization": f"Bearer {token}"},
                )
            ).json()
    # Exact: the text seen plus the text resumed is the answer; every other event once.
    assert text_of(first) + text_of(resumed) == ANSWER
    assert whole_events(first) + whole_events(resumed) == stored_whole(stored)


async def test_a_stream_process_that_is_gone_costs_no_run(
    database_url: str,
    database: object,
    tmp_path: Path,
    openai_server: FakeOpenAIServer,  # noqa: F811
) -> None:
    openai_server.push(Reply(text=ANSWER, deltas=PIECES))
    with _serve(tmp_path, "a", database_url, openai_server, PRESSLOOP_STREAM_PROCESS="1") as a:
        [pid] = a.stream_processes()
        os.kill(pid, signal.SIGKILL)  # before the turn: its serving process finds it gone
        async with httpx.AsyncClient(base_url=a.url, timeout=30, trust_env=False) as client:
            frames = await _submit_streamed(client, a.admin_token)
        assert text_of(frames) == ANSWER
        assert frames[-1].event == "run.finished"
        assert frames[-1].data["data"]["status"] == "succeeded"
        assert "a stream stays in this process" in a.output()


async def test_turned_off_no_stream_process_starts_and_the_serving_process_streams(
    database_url: str,
    database: object,
    tmp_path: Path,
    openai_server: FakeOpenAIServer,  # noqa: F811
) -> None:
    openai_server.push(Reply(text=ANSWER, deltas=PIECES, delay_s=THINKING_S))
    with _serve(tmp_path, "a", database_url, openai_server, PRESSLOOP_STREAM_PROCESS="0") as a:
        assert a.stream_processes() == []
        async with httpx.AsyncClient(base_url=a.url, timeout=30, trust_env=False) as client:
            frames = await _submit_streamed(client, a.admin_token)
    # The parts come from the serving process itself, before their commit, as the model sends
    # them.
    assert [f.data["data"]["delta"] for f in frames if isinstance(f.id, str)] == list(PIECES)
    assert text_of(frames) == ANSWER
    assert frames[-1].data["data"]["status"] == "succeeded"
    assert "stream stays in this process" not in a.output()


# An emoji's two halves in two chunks (a server cutting by UTF-16 code units), a half alone, a
# NUL (PostgreSQL stores none).
HALVES = ("Hi ", "\ud83d", "\ude00", " there \udc00", "! a\x00b")


@pytest.mark.parametrize("stream_process", ["1", "0"])
async def test_an_answer_with_halves_of_a_character_is_streamed_stored_and_finished(
    database_url: str,
    database: object,
    tmp_path: Path,
    openai_server: FakeOpenAIServer,  # noqa: F811
    stream_process: str,
) -> None:
    # Before, the half characters reached the database as they came: the run's text could not
    # be written (no UTF-8 for a lone surrogate), the turn failed, and each retry asked the model
    # again. Now the stream and the store get the same well-formed text (providers/text.py).
    whole = "Hi 😀 there \ufffd! a\ufffdb"
    openai_server.push(Reply(text="".join(HALVES), deltas=HALVES, delay_s=THINKING_S))
    settings = {"PRESSLOOP_STREAM_PROCESS": stream_process}
    with _serve(tmp_path, "a", database_url, openai_server, **settings) as a:
        async with httpx.AsyncClient(base_url=a.url, timeout=30, trust_env=False) as client:
            frames = await _submit_streamed(client, a.admin_token)
            auth = {"Authorization": f"Bearer {a.admin_token}"}
            run_id = frames[0].data["run_id"]
            stored = (await client.get(f"/v1/runs/{run_id}/events", headers=auth)).json()
            run = (await client.get(f"/v1/runs/{run_id}", headers=auth)).json()
    parts = [f.data["data"]["delta"] for f in frames if isinstance(f.id, str)]
    assert parts == ["Hi ", "😀", " there \ufffd", "! a\ufffdb"]  # before their commit
    assert text_of(frames) == whole
    assert whole_events(frames) == stored_whole(stored)
    assert (run["status"], run["attempt"], run["result"]["assistant_text"]) == (
        "succeeded",
        1,
        whole,
    )
    assert len(openai_server.requests) == 1  # the model was asked once
    assert "write failed" not in a.output()


async def test_a_provider_the_stream_process_cannot_read_keeps_the_streams_here(
    database_url: str, database: object, tmp_path: Path
) -> None:
    # The scripted provider has no wire to relay: no stream process is started, and a stream
    # gets its parts from the serving process, as without the setting.
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": ANSWER}]))
    env = serve_env(
        tmp_path / "data", script, PRESSLOOP_DATABASE_URL=database_url, PRESSLOOP_STREAM_PROCESS="1"
    )
    with Serve(tmp_path, env, "--no-local-wordpress") as server:
        assert server.stream_processes() == []
        assert "no stream process for this provider" in server.output()
        async with httpx.AsyncClient(base_url=server.url, timeout=30, trust_env=False) as client:
            frames = await _submit_streamed(client, server.admin_token)
        assert text_of(frames) == ANSWER
        assert frames[-1].event == "run.finished"


async def test_a_stream_process_that_does_not_answer_leaves_the_stream_here_at_its_timeout(
    database_url: str,
    database: object,
    tmp_path: Path,
    openai_server: FakeOpenAIServer,  # noqa: F811
) -> None:
    """Paused (SIGSTOP), the stream process's sockets still accept: the serving process waits
    PRESSLOOP_STREAM_OPEN_TIMEOUT (here 0.3 s, not the default 2 s) for its answer, then
    streams the run itself; the model call that went to the paused relay times out
    (PRESSLOOP_PROVIDER_TIMEOUT) and its retry goes straight to the model."""
    openai_server.push(Reply(text=ANSWER, deltas=PIECES))
    settings = {
        "PRESSLOOP_STREAM_PROCESS": "1",
        "PRESSLOOP_STREAM_OPEN_TIMEOUT": "0.3",
        "PRESSLOOP_PROVIDER_TIMEOUT": "3",
        "PRESSLOOP_PROVIDER_RETRY_BASE": "0.05",
    }
    with _serve(tmp_path, "a", database_url, openai_server, **settings) as a:
        [pid] = a.stream_processes()
        os.kill(pid, signal.SIGSTOP)
        try:
            auth = {"Authorization": f"Bearer {a.admin_token}"}
            async with httpx.AsyncClient(base_url=a.url, timeout=30, trust_env=False) as client:
                thread = (await client.post("/v1/threads", json={}, headers=auth)).json()["id"]
                async with client.stream(
                    "POST",
                    f"/v1/threads/{thread}/runs",
                    json={"message": "hello", "mode": "stream"},
                    headers={**auth, **SSE},
                ) as response:
                    assert response.status_code == 200
                    lines = response.aiter_lines()
                    headed = asyncio.get_running_loop().time()
                    head = await read_frames(lines, until=lambda f: f.event is not None)
                    waited_s = asyncio.get_running_loop().time() - headed
                    frames = [*head, *await read_frames(lines)]
        finally:
            os.kill(pid, signal.SIGCONT)
        frames = events_only(frames)
        # The run's first event came once the open timed out: at 0.3 s, well before 2 s.
        assert waited_s < 1.5, waited_s
        assert text_of(frames) == ANSWER
        assert frames[-1].data["data"]["status"] == "succeeded"
        assert "a stream stays in this process" in a.output()


def thread_nice_values(pid: int) -> set[int]:
    """The nice values of process `pid`'s threads (Linux keeps one a thread; /proc/PID/task)."""
    values = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        stat = (task / "stat").read_text()
        # The fields after the command's closing parenthesis start at the 3rd; nice is the 19th.
        values.add(int(stat.rsplit(")", 1)[1].split()[16]))
    return values


def serving_processes(serve: Serve) -> list[int]:
    """The pids of `serve`'s serving processes: the first, and those it started (`--fd`)."""
    assert serve.process is not None
    return [serve.process.pid, *serve.children("serve --fd")]


@pytest.mark.parametrize("turn_nice", [7, 0])
async def test_the_serving_processes_run_turns_below_their_stream_processes(
    database_url: str,
    database: object,
    tmp_path: Path,
    openai_server: FakeOpenAIServer,  # noqa: F811
    turn_nice: int,
) -> None:
    """Two serving processes start their stream processes (PRESSLOOP_STREAM_PROCESS unset), and
    lower their own priority by PRESSLOOP_TURN_NICE (here 7, not the default 10; 0: unchanged):
    every thread of each, while the stream processes keep the priority `pressloop serve` was
    started with, so a token's wakeup gets a core first."""
    base = os.getpriority(os.PRIO_PROCESS, 0)
    settings = {
        "PRESSLOOP_SERVE_PROCESSES": "2",
        "PRESSLOOP_TURN_NICE": str(turn_nice),
    }
    with _serve(tmp_path, "a", database_url, openai_server, **settings) as a:
        streamers = a.stream_processes()
        assert len(streamers) == 2
        lowered = {min(19, base + turn_nice)}
        # The second serving process lowers its priority as it starts serving: up to 30 s.
        for _ in range(300):
            serving = serving_processes(a)
            if len(serving) == 2 and all(thread_nice_values(p) == lowered for p in serving):
                break
            await asyncio.sleep(0.1)
        assert len(serving) == 2
        assert [thread_nice_values(p) for p in serving] == [lowered, lowered]
        assert [thread_nice_values(p) for p in streamers] == [{base}, {base}]

"""Event streams over a real uvicorn server: stream mode, resume with Last-Event-ID, the worker."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.api.conftest import Api, ApiFactory, Frame, events_only, folded, read_frames

SSE = {"Accept": "text/event-stream"}

# A remembered fact, then an answer the model gives only once the test opens the gate.
HELD_ANSWER: list[dict[str, Any]] = [
    {"tool_calls": [{"name": "remember", "arguments": {"content": "teal"}}]},
    {"text": "Done at last.", "delay_s": 1},
]


def is_finished(frame: Frame) -> bool:
    return frame.event == "run.finished"


def is_result(frame: Frame) -> bool:
    return frame.event == "result"


async def stream(
    api: Api, run_id: str, headers: dict[str, str] | None = None, query: str = ""
) -> list[Frame]:
    async with api.client.stream(
        "GET",
        f"/v1/runs/{run_id}/events{query}",
        headers={**api.auth("viewer"), **SSE, **(headers or {})},
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        return events_only(await read_frames(response))


def check_frames(frames: list[Frame]) -> None:
    for frame in frames:
        # A text delta sent before its commit is at `N.k`: event N, then k text parts after it.
        data = frame.data["data"]
        expected = f"{data['after']}.{data['part']}" if "part" in data else frame.data["seq"]
        assert frame.id == expected and frame.event == frame.data["type"]
        assert set(frame.data) == {"run_id", "thread_id", "seq", "type", "ts", "data"}


def seqs_of(frames: list[Frame]) -> list[int]:
    """The seq of each event the frames carry (the parts of one delta event count once)."""
    seqs: list[int] = []
    for frame in frames:
        if not seqs or seqs[-1] != frame.data["seq"]:
            seqs.append(frame.data["seq"])
    return seqs


async def test_stream_mode_sends_every_event_until_the_run_finishes(make_api: ApiFactory) -> None:
    api = await make_api(server=True)
    thread_id = await api.thread()
    async with api.client.stream(
        "POST",
        f"/v1/threads/{thread_id}/runs",
        json={"message": "Remember teal", "mode": "stream"},
        headers=api.auth(),
    ) as response:
        assert response.status_code == 200
        frames = events_only(await read_frames(response))

    check_frames(frames)
    assert seqs_of(frames) == list(range(1, len(seqs_of(frames)) + 1))
    types = [f.event for f in frames]
    assert types[0] == "run.started" and types[-1] == "run.finished"
    assert {"action", "result", "tokens", "message"} <= set(types)
    finished = frames[-1].data
    assert finished["data"]["status"] == "succeeded"
    assert finished["data"]["result"]["assistant_text"] == "Noted: you like teal."
    deltas = "".join(f.data["data"].get("delta", "") for f in frames if f.event == "message")
    assert deltas == "Noted: you like teal."
    run_id = frames[0].data["run_id"]
    stored = (await api.client.get(f"/v1/runs/{run_id}/events", headers=api.auth())).json()
    assert folded(frames) == stored


async def test_a_resumed_stream_gets_every_later_event_exactly_once(make_api: ApiFactory) -> None:
    api = await make_api(server=True)
    thread_id = await api.thread()
    posted = await api.client.post(
        f"/v1/threads/{thread_id}/runs", json={"message": "Remember teal"}, headers=api.auth()
    )
    run_id = posted.json()["run"]["id"]

    everything = await stream(api, run_id)
    seqs = [f.id for f in everything if f.id is not None]
    assert seqs == list(range(1, len(seqs) + 1)) and everything[-1].event == "run.finished"
    middle = seqs[len(seqs) // 2]

    resumed = await stream(api, run_id, {"Last-Event-ID": str(middle)})
    assert [f.id for f in resumed] == seqs[middle:]
    assert [f.data for f in resumed] == [f.data for f in everything[middle:]]
    # `after` works too, and Last-Event-ID (what a reconnecting browser sends) wins over it.
    after = await stream(api, run_id, query=f"?after={middle}")
    assert [f.id for f in after] == seqs[middle:]
    both = await stream(api, run_id, {"Last-Event-ID": str(middle + 1)}, query="?after=1")
    assert [f.id for f in both] == seqs[middle + 1 :]
    # Resuming after the last event of a finished run ends at once, with nothing.
    assert await stream(api, run_id, {"Last-Event-ID": str(seqs[-1])}) == []


async def test_a_stream_resumed_while_the_run_is_running_misses_nothing(
    make_api: ApiFactory,
) -> None:
    api = await make_api(HELD_ANSWER, server=True)
    thread_id = await api.thread()
    run = (
        await api.client.post(
            f"/v1/threads/{thread_id}/runs",
            json={"message": "Remember teal", "mode": "background"},
            headers=api.auth(),
        )
    ).json()["run"]

    # First connection: read until the action's result, then drop the connection.
    async with api.client.stream(
        "GET", f"/v1/runs/{run['id']}/events", headers={**api.auth(), **SSE}
    ) as response:
        first = events_only(await read_frames(response, until=is_result))
    assert first[-1].event == "result" and not api.gate.opened.is_set()
    resume_at = next(f.id for f in first if f.event == "action")
    assert resume_at is not None

    # Reconnect from the middle while the model is still held: the rest of what exists now,
    # then (after the gate opens) everything new, each once, up to run.finished.
    async with api.client.stream(
        "GET",
        f"/v1/runs/{run['id']}/events",
        headers={**api.auth(), **SSE, "Last-Event-ID": str(resume_at)},
    ) as response:
        lines = response.aiter_lines()
        second = events_only(await read_frames(lines, until=is_result))
        assert seqs_of(second) == [s for s in seqs_of(first) if s > resume_at]
        await api.gate.reached.wait()
        api.gate.open()
        second += events_only(await read_frames(lines))

    check_frames(second)
    seqs = seqs_of(second)
    assert seqs == list(range(resume_at + 1, resume_at + 1 + len(seqs)))
    assert second[-1].event == "run.finished"
    stored = (await api.client.get(f"/v1/runs/{run['id']}/events", headers=api.auth())).json()
    assert [e["seq"] for e in stored] == list(range(1, resume_at + 1)) + seqs


async def test_background_runs_are_finished_by_the_in_process_worker(make_api: ApiFactory) -> None:
    api = await make_api(
        [{"text": "from the worker"}, {"text": "posted"}], server=True, run_worker=True
    )
    thread_id = await api.thread()
    # Queued without anyone starting it: only the app's worker can run it.
    queued = (await api.service.submit(thread_id, "hello")).run
    frames = await stream(api, queued.id)
    assert frames[-1].event == "run.finished"
    worker = frames[0].data["data"]["worker"]
    assert worker == api.service.runner.owner
    shown = (await api.client.get(f"/v1/runs/{queued.id}", headers=api.auth())).json()
    assert shown["status"] == "succeeded"
    assert shown["result"]["assistant_text"] == "from the worker"

    accepted = await api.client.post(
        f"/v1/threads/{thread_id}/runs",
        json={"message": "again", "mode": "background"},
        headers=api.auth(),
    )
    assert accepted.status_code == 202
    run_id = accepted.json()["run"]["id"]
    assert (await stream(api, run_id))[-1].event == "run.finished"
    shown = (await api.client.get(f"/v1/runs/{run_id}", headers=api.auth())).json()
    assert shown["status"] == "succeeded" and shown["result"]["assistant_text"] == "posted"


async def test_pings_keep_a_quiet_stream_open_and_a_disconnect_ends_it(
    make_api: ApiFactory,
) -> None:
    api = await make_api([{"text": "late", "delay_s": 1}], server=True, sse_ping_s=0.05)
    thread_id = await api.thread()
    run = (
        await api.client.post(
            f"/v1/threads/{thread_id}/runs",
            json={"message": "hi", "mode": "background"},
            headers=api.auth(),
        )
    ).json()["run"]
    await api.gate.reached.wait()
    # run.started goes out with the group committer's next batch: wait for it, so the first
    # frame is that event and not a ping (on a loaded machine the commit can take > 50 ms).
    committed = api.service.bus.subscribe(run["id"])
    async with asyncio.timeout(10):
        while not await api.service.events(run["id"]):
            await committed.wait(1.0)
    api.service.bus.unsubscribe(run["id"], committed)
    streams = api.app.state.streams

    async with api.client.stream(
        "GET", f"/v1/runs/{run['id']}/events", headers={**api.auth(), **SSE}
    ) as response:
        frames = await read_frames(response, until=lambda f: f.comment is not None)
        assert frames[0].event == "run.started"
        assert frames[-1].comment is not None and frames[-1].comment.startswith("ping")
        assert streams.open == 1
    # The client went away: the server's generator stops (and leaves the event bus).
    async with asyncio.timeout(5):
        await streams.idle.wait()
    assert streams.open == 0
    assert not api.service.bus.subscribed(run["id"])
    api.gate.open()
    assert (await api.service.wait(run["id"])).status.value == "succeeded"

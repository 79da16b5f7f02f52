"""The local model runs in a process of its own: when that process dies in the middle of a
decision (SIGKILL here; an illegal instruction or the out-of-memory killer end it the same way),
the run gets a clear, retryable error, `pressloop serve` goes on serving, and the next decision
is answered by a new model process."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from pressloop.config import Settings
from pressloop.providers.local import build_local_provider
from pressloop.providers.local.model_file import ModelPlace, prepare
from tests.local.conftest import MODEL_TEST_TIMEOUT_S, Prepared
from tests.local.test_prompt_state import small_request
from tests.ui.conftest import Server, StartServer, start_server  # noqa: F401


def model_processes(parent: int) -> list[int]:
    """The model processes `pressloop serve` (pid `parent`) started, alive now."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == parent and b"pressloop.providers.local.model_server" in command:
            found.append(int(entry.name))
    return found


def maps_model(pid: int) -> bool:
    try:
        return ".gguf" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


def wait_for(what: str, check: Any, timeout_s: float = 300) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def events(server: Server, run_id: str) -> list[dict[str, Any]]:
    answer = server.api.get(f"/v1/runs/{run_id}/events")
    answer.raise_for_status()
    body = answer.json()
    return list(body["events"] if isinstance(body, dict) else body)


def local_data_dir(prepared: Prepared, into: Path) -> Path:
    """A data directory as `make run` leaves it: the model (linked from the cache) and the
    system prompt's saved state."""
    settings = prepared.settings.model_copy(update={"data_dir": into})
    prepare(ModelPlace.from_settings(settings))
    states = prepared.settings.data_dir / "models" / "prefix-states"
    shutil.copytree(states, into / "models" / "prefix-states")
    return into


@pytest.mark.timeout(MODEL_TEST_TIMEOUT_S)
def test_a_killed_model_process_fails_the_decision_retryably_and_the_service_goes_on(
    start_server: StartServer,  # noqa: F811
    prepared: Prepared,
    tmp_path: Path,
) -> None:
    data = local_data_dir(prepared, tmp_path / "local-data")
    server = start_server(
        [],
        PRESSLOOP_PROVIDER="local",
        PRESSLOOP_DATA_DIR=str(data),
        PRESSLOOP_MODEL_CACHE=str(prepared.settings.model_cache),
        PRESSLOOP_BACKOFF_BASE="0.5",
        PRESSLOOP_BACKOFF_CAP="1",
    )
    serve = server.process.pid
    # The service itself never loads llama.cpp: only its model process does.
    thread = server.api.post("/v1/threads", json={}).json()["id"]
    started = server.api.post(
        f"/v1/threads/{thread}/runs",
        json={"message": "List the installed plugins", "mode": "background"},
    )
    assert started.status_code == 202, started.text
    run_id = started.json()["run"]["id"]

    # The first decision starts the model process; kill it while that decision is in flight
    # (the process has the model file mapped: it is loading it or answering with it).
    (first,) = wait_for("the model process", lambda: model_processes(serve), 120)
    wait_for("the model to be loaded", lambda: maps_model(first), 120)
    assert server.api.get(f"/v1/runs/{run_id}").json()["status"] == "running"
    assert "libllama" not in Path(f"/proc/{serve}/maps").read_text()
    assert "libllama" in Path(f"/proc/{first}/maps").read_text()
    os.kill(first, signal.SIGKILL)

    def retry_event() -> dict[str, Any] | None:
        return next((e for e in events(server, run_id) if e["type"] == "error"), None)

    error = wait_for("the run's error", retry_event, 120)
    failure = error["data"]  # the error of the attempt that will be retried
    assert failure["retryable"] is True, failure
    assert "the local model process stopped: SIGKILL" in failure["message"], failure
    assert "the next decision starts a new one" in failure["message"], failure

    # The service is still there, and serves another thread: a new model process answers.
    assert server.process.poll() is None
    assert server.api.get("/healthz").status_code == 200
    other = server.api.post("/v1/threads", json={}).json()["id"]
    answered = server.api.post(
        f"/v1/threads/{other}/runs",
        json={"message": "Tell me a joke", "mode": "wait"},
        timeout=MODEL_TEST_TIMEOUT_S,
    )
    assert answered.status_code == 200, answered.text
    assert answered.json()["run"]["status"] == "succeeded", answered.text
    (second,) = model_processes(serve)
    assert second != first

    # The killed run was retried (attempt 2) by the new model process, and succeeded.
    def finished() -> dict[str, Any] | None:
        run: dict[str, Any] = server.api.get(f"/v1/runs/{run_id}").json()
        return run if run["status"] not in ("queued", "running") else None

    run = wait_for("the retried run", finished, MODEL_TEST_TIMEOUT_S)
    assert run["status"] == "succeeded", run
    assert run["attempt"] == 2, run
    assert model_processes(serve) == [second]


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has stopped; it only waits to be reaped


@pytest.mark.timeout(MODEL_TEST_TIMEOUT_S)
async def test_cancelling_a_decision_stops_it_and_a_queued_one_is_dropped(
    local_settings: Settings,
) -> None:
    provider = build_local_provider(local_settings)
    try:
        # A decision waiting behind another is dropped when cancelled: the process goes on.
        first = asyncio.create_task(provider.complete(small_request()))
        queued = asyncio.create_task(provider.complete(small_request()))
        pid = await until(lambda: provider.process.pid)
        queued.cancel()
        await first
        with pytest.raises(asyncio.CancelledError):
            await queued
        assert provider.process.pid == pid and provider.process.starts == 1

        # The decision in flight is stopped: its process ends at once, the next one starts anew.
        running = asyncio.create_task(provider.complete(small_request()))
        await asyncio.sleep(0.5)
        cancelled_at = time.monotonic()
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        await until(lambda: not alive(pid))
        assert time.monotonic() - cancelled_at < 5
        response = await provider.complete(small_request())
        assert provider.process.starts == 2 and provider.process.pid != pid
        assert "list_plugins" in response.text
    finally:
        await provider.aclose()


async def until(check: Any, timeout_s: float = 120) -> Any:
    deadline = time.monotonic() + timeout_s
    while not (value := check()):
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)
    return value

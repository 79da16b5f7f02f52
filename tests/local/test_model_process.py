"""The local model runs in a process of its own: when that process dies in the middle of a
decision (SIGKILL here; an illegal instruction or the out-of-memory killer end it the same way),
the run gets a clear, retryable error, `pressloop serve` goes on serving, and the next decision
is answered by a new model process."""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from pressloop.local_model import ModelPlace, prepare
from tests.local.conftest import MODEL_TEST_TIMEOUT_S, Prepared
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
    thread = server.api.post("/v1/threads", json={}).json()["id"]
    started = server.api.post(
        f"/v1/threads/{thread}/runs",
        json={"message": "List the installed plugins", "mode": "background"},
    )
    assert started.status_code == 202, started.text
    run_id = started.json()["run"]["id"]

    # The first decision starts the model process; kill it while that decision is in flight.
    (first,) = wait_for("the model process", lambda: model_processes(serve), 120)
    assert server.api.get(f"/v1/runs/{run_id}").json()["status"] == "running"
    os.kill(first, signal.SIGKILL)

    def retry_event() -> dict[str, Any] | None:
        return next((e for e in events(server, run_id) if e["type"] == "error"), None)

    error = wait_for("the run's error", retry_event, 120)
    failure = error["data"]["result"]["error"]
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

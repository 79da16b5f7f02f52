"""`pressloop serve` starts its stream processes and waits until they serve: a stream handed
over at once (the first request after start-up) must not wait for the stream process's imports
(3 s on AMD EPYC 25/1) and fall back to its serving process."""

from __future__ import annotations

import logging
import signal
import time
from pathlib import Path

import httpx
import pytest

from pressloop.config import Settings
from pressloop.streamer.launch import StreamProcess, StreamProcesses


def test_the_stream_processes_serve_when_their_wait_returns(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, serve_processes=2)
    processes = StreamProcesses.launch(settings)
    processes.wait_ready(settings.stream_ready_timeout_s)
    try:
        for process in processes.processes:
            origin = process.relay.split("/relay/")[0]
            # Answered at once: the process was serving before the wait returned.
            response = httpx.get(f"{origin}/", timeout=0.5, trust_env=False)
            assert response.status_code == 404  # not a relayed call: refused by the stream process
    finally:
        processes.stop()


def test_waiting_for_a_stream_process_gives_up_at_its_timeout(tmp_path: Path) -> None:
    process = StreamProcess.start(Settings(data_dir=tmp_path))
    try:
        started = time.monotonic()
        assert process.wait_ready(0.01) is False  # still importing
        assert time.monotonic() - started < 1.0
        assert process.wait_ready(10.0) is True  # asked once: nothing more to wait for
    finally:
        process.stop()


def test_the_wait_gives_up_at_the_ready_timeout(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = Settings(data_dir=tmp_path, serve_processes=2, stream_ready_timeout_s=0.05)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="pressloop.streamer.launch"):
        processes = StreamProcesses.launch(settings)
        processes.wait_ready(settings.stream_ready_timeout_s)
    try:
        # Their imports take a second or more: the wait ended at PRESSLOOP_STREAM_READY_TIMEOUT.
        assert time.monotonic() - started < 1.0
        assert len(caplog.records) == 2
        assert "not serving yet" in caplog.records[0].getMessage()
        assert all(p.process.poll() is None for p in processes.processes)  # still starting
    finally:
        processes.stop()


def test_a_stream_process_that_does_not_stop_is_killed_at_the_stop_timeout(
    tmp_path: Path,
) -> None:
    process = StreamProcess.start(Settings(data_dir=tmp_path, stop_timeout_s=0.3))
    assert process.wait_ready(60.0) is True
    process.process.send_signal(signal.SIGSTOP)  # deaf to SIGTERM until woken
    started = time.monotonic()
    process.stop()
    assert process.process.returncode == -signal.SIGKILL
    assert time.monotonic() - started < 5.0  # PRESSLOOP_STOP_TIMEOUT, not the default 20 s


@pytest.mark.parametrize(
    ("processes", "asked", "started"),
    [(2, None, True), (1, None, True), (2, False, False), (1, False, False), (1, True, True)],
)
def test_serving_processes_start_stream_processes_unless_told_otherwise(
    processes: int, asked: bool | None, started: bool
) -> None:
    # PRESSLOOP_STREAM_PROCESS unset: on, one serving process or several (benchmarks.md,
    # section 3ag: one alone missed 20 ms at the slowest CPU's speed without it).
    settings = Settings(serve_processes=processes, stream_process=asked)
    assert settings.starts_stream_processes() is started

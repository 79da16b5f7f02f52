"""`pressloop serve` starts its stream processes and waits until they serve: a stream handed
over at once (the first request after start-up) must not wait for the stream process's imports
(3 s on AMD EPYC 25/1) and fall back to its serving process."""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from pressloop.config import Settings
from pressloop.streamer.launch import StreamProcess, StreamProcesses


def test_the_stream_processes_serve_when_start_returns(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, serve_processes=2)
    processes = StreamProcesses.start(settings)
    try:
        for process in processes.processes:
            origin = process.relay.split("/relay/")[0]
            # Answered at once: the process was serving before start returned.
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

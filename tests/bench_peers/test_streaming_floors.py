"""Workload 3's floors: the harness alone (the bench client reading the model server, nothing
between) and the bare relay (the turn's model calls through Pressloop's model client); and
the report, which shows them beside the systems but never takes one for the best peer."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator

import pytest

from bench.peers import report, report_streaming, server_usage, streaming
from bench.peers.model_server import STAMP, ModelServer, base_url
from bench.peers.sys_relay import RelaySystem
from bench.peers.system import MESSAGE, Target


@pytest.fixture
async def model_url() -> AsyncIterator[str]:
    model = ModelServer()
    port = await model.start()
    yield base_url(port, latency_ms=50, gap_ms=5)
    await model.close()


async def test_the_harness_alone_streams_every_final_answer(model_url: str) -> None:
    result = await streaming._direct(model_url, streams=5)
    assert result["finished"] == 5 and result["errors"] == []
    # Each stream's first token crossed nothing but the loopback and the client.
    assert len(result["first_ms"]) == 5
    assert all(0 <= ms < 5000 for ms in result["first_ms"])
    assert result["serving"] == "direct"


async def test_the_relay_makes_the_turns_model_calls_and_relays_the_text(model_url: str) -> None:
    relay = RelaySystem()
    await relay.open(Target(database="sqlite", model_url=model_url))
    try:
        deltas = [delta async for delta in relay.stream(await relay.new_thread(), MESSAGE)]
    finally:
        await relay.close()
    assert STAMP.search(deltas[0])  # the first token, stamp and all, as the model sent it
    assert "".join(deltas).endswith("ok.")


def _run(first_ms: list[float]) -> dict[str, object]:
    return {
        "first_ms": first_ms,
        "finished": len(first_ms),
        "streams": len(first_ms),
        "turn_s": [1.0],
        "peak_rss_mb": None,
        "server_cpu_ms": 20.0,
        "serving": "peer",
    }


def test_a_floor_is_shown_but_never_the_best_peer() -> None:
    results = {
        "sqlite": {
            "pressloop": [{**_run([1.0, 2.0, 30.0]), "serving": "pressloop"}],
            "pydantic-ai": [_run([5.0, 6.0, 60.0])],
            "direct": [{**_run([0.5, 0.6, 0.7]), "serving": "direct"}],
        }
    }
    verdicts: list[report.Verdict] = []
    text = "\n".join(report_streaming.streaming_section(results, verdicts))
    assert "Floor: harness alone" in text
    # Pressloop's p99 is held against Pydantic AI's, not against the floor's.
    (verdict,) = verdicts
    assert "p99 / best peer's p99 0.50x" in verdict.text


def test_the_server_cpu_a_turn_is_reported_beside_the_first_frames() -> None:
    runs = [{**_run([1.0, 2.0, 3.0]), "server_cpu_ms": ms} for ms in (11.0, 9.5, 14.0)]
    peer = [{**_run([5.0, 6.0, 7.0]), "server_cpu_ms": 30.0}] * 3
    text = "\n".join(
        report_streaming.streaming_section({"sqlite": {"pressloop": runs, "pydantic-ai": peer}}, [])
    )
    assert "server CPU a turn (ms)" in text
    assert "| 11.0 (9.5-14.0) |" in text and "| 30.0 (30.0-30.0) |" in text


def test_the_server_cpu_counts_its_serving_processes() -> None:
    """A server's CPU is its own and its children's (`pressloop serve` with more processes)."""
    burn = "import time\nend = time.process_time() + 0.4\nwhile time.process_time() < end: pass\n"
    before = server_usage.served_cpu_s(os.getpid())
    with subprocess.Popen(
        [sys.executable, "-c", burn + "print('burnt', flush=True)\ntime.sleep(30)"],
        stdout=subprocess.PIPE,
        text=True,
    ) as child:
        try:
            assert child.stdout is not None and child.stdout.readline().strip() == "burnt"
            after = server_usage.served_cpu_s(os.getpid())
            assert after["serving"] - before["serving"] >= 0.35
            assert after["stream"] == before["stream"] == 0.0
        finally:
            child.kill()


def test_the_server_cpu_of_its_stream_processes_is_told_apart() -> None:
    """A process started as `python -m pressloop.streamer` is a stream process: its CPU is shown
    on its own, beside the whole server's."""
    burn = "import time\nend = time.process_time() + 0.4\nwhile time.process_time() < end: pass\n"
    before = server_usage.served_cpu_s(os.getpid())
    code = burn + "print('burnt', flush=True)\ntime.sleep(30)"
    # The module's name as an argument, as `-m pressloop.streamer` leaves it in the command line.
    with subprocess.Popen(
        [sys.executable, "-c", code, "pressloop.streamer"], stdout=subprocess.PIPE, text=True
    ) as child:
        try:
            assert child.stdout is not None and child.stdout.readline().strip() == "burnt"
            after = server_usage.served_cpu_s(os.getpid())
            assert after["stream"] - before["stream"] >= 0.35
            assert after["serving"] - before["serving"] < 0.35
        finally:
            child.kill()


def test_the_server_cpu_counts_processes_started_from_a_thread_and_their_children() -> None:
    """`pressloop serve` starts its stream processes from a thread: Linux lists a child under
    the thread that started it, so the main thread's list alone missed them (and their CPU)."""
    burn = "import time\nend = time.process_time() + 0.4\nwhile time.process_time() < end: pass\n"
    # A child that starts a grandchild which burns, both kept until killed.
    burner = burn + "import time; time.sleep(30)"
    parent = (
        "import subprocess, sys\n"
        f"child = subprocess.Popen([sys.executable, '-c', {burner!r}])\n"
        "print(child.pid, flush=True)\nchild.wait()\n"
    )
    started: list[subprocess.Popen[str]] = []

    def start() -> None:
        started.append(
            subprocess.Popen([sys.executable, "-c", parent], stdout=subprocess.PIPE, text=True)
        )

    before = server_usage.served_cpu_s(os.getpid())
    thread = threading.Thread(target=start)
    thread.start()
    thread.join()
    [child] = started
    grandchild = None
    try:
        assert child.stdout is not None
        grandchild = int(child.stdout.readline())
        assert {child.pid, grandchild} <= set(server_usage.served_processes(os.getpid()))
        deadline = time.monotonic() + 10
        while sum(server_usage.served_cpu_s(os.getpid()).values()) - sum(before.values()) < 0.35:
            assert time.monotonic() < deadline, "the grandchild's CPU was not counted"
            time.sleep(0.05)
    finally:
        if grandchild is not None:
            os.kill(grandchild, 9)
        with child:  # closes its pipe
            child.kill()


def test_each_round_shows_how_fast_the_machine_was_before_it() -> None:
    """A shared host's speed moves within minutes: each round's row names the busy loop timed
    before Pressloop's case, so repeats measured on a slower machine show as such."""
    runs = [
        {**_run([1.0, 2.0, 3.0]), "serving": "pressloop", "round": n, "busy_loop_ms": ms}
        for n, ms in ((1, 64.2), (2, 127.0))
    ]
    peer = [{**_run([5.0, 6.0, 7.0]), "round": n} for n in (1, 2)]
    text = "\n".join(
        report_streaming.streaming_section({"sqlite": {"pressloop": runs, "pydantic-ai": peer}}, [])
    )
    assert "busy loop at its start (ms)" in text
    rows = [line for line in text.splitlines() if line.startswith(("| 1 |", "| 2 |"))]
    assert len(rows) == 2 and "| 64 |" in rows[0] and "| 127 |" in rows[1]


def test_each_round_shows_what_pressloops_stream_processes_spent_of_its_cpu() -> None:
    runs = [
        {**_run([1.0, 2.0, 3.0]), "serving": "pressloop", "round": n, **cpu}
        for n, cpu in (
            (1, {"server_cpu_ms": 53.7, "stream_cpu_ms": 8.1}),
            (2, {"server_cpu_ms": 49.0}),  # saved before the split was measured
        )
    ]
    peer = [{**_run([5.0, 6.0, 7.0]), "round": n} for n in (1, 2)]
    text = "\n".join(
        report_streaming.streaming_section({"sqlite": {"pressloop": runs, "pydantic-ai": peer}}, [])
    )
    rows = [line for line in text.splitlines() if line.startswith(("| 1 |", "| 2 |"))]
    assert "| 53.7 / 8.1 |" in rows[0] and "| 49.0 / - |" in rows[1]


def test_the_machine_speed_is_a_busy_loop_in_milliseconds() -> None:
    assert 1.0 < streaming.machine_speed_ms() < 10_000.0


def test_the_report_shows_the_relays_reads_beside_pressloops_first_frames() -> None:
    """With `--model-relay`: each of Pressloop's repeats beside the relay's reads of the same
    first tokens, and the relay's CPU."""
    runs = [
        {**_run(firsts), "serving": "pressloop-2", "round": n, **relay}
        for n, firsts, relay in (
            (1, [1.0, 2.0, 40.0], {"relay_read_ms": [0.1, 0.2, 3.5], "relay_cpu_ms": 1.5}),
            (2, [1.0, 2.0, 30.0], {"relay_read_ms": [0.1, 0.4, 4.5], "relay_cpu_ms": 1.2}),
        )
    ]
    text = "\n".join(report_streaming.streaming_section({"postgres": {"pressloop": runs}}, []))
    assert "relay read median / p99 / max (ms)" in text
    assert "| 1 | PostgreSQL | - | 2.0 / 40.0 | 0.20 / 3.50 / 3.50 | 3/3 | 1.50 |" in text
    assert "| 2 | PostgreSQL | - | 2.0 / 30.0 | 0.40 / 4.50 / 4.50 | 3/3 | 1.20 |" in text


def test_a_run_without_the_relay_has_no_relay_table() -> None:
    runs = [{**_run([1.0, 2.0, 40.0]), "serving": "pressloop"}]
    text = "\n".join(report_streaming.streaming_section({"sqlite": {"pressloop": runs}}, []))
    assert "relay read" not in text

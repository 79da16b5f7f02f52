"""`bench.slow_cpu`: a command run with every core partly taken by real-time spinners, as on a
slower CPU; the streaming report names the slowing beside the CPU."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench import slow_cpu
from bench.peers import streaming

ROOT = Path(__file__).resolve().parents[2]

# Run by the command under test, while the spinners run: what each spinner is, seen from outside.
INSPECT_SPINNERS = """
import os, sys
found = []
for pid in os.listdir('/proc'):
    if not pid.isdigit():
        continue
    try:
        argv = open(f'/proc/{pid}/cmdline', 'rb').read().split(b'\\0')
    except OSError:
        continue
    if b'--spinner' in argv:
        cpu = int(argv[argv.index(b'--spinner') + 1])
        policy = os.sched_getscheduler(int(pid))
        found.append((cpu, policy == os.SCHED_FIFO, os.sched_getaffinity(int(pid)) == {cpu}))
print(sorted(found))
print(os.environ['BENCH_SLOW_CPU'])
sys.exit(7)
"""


def _run(*args: str, preexec: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    command = [*(preexec or []), sys.executable, "-m", "bench.slow_cpu", *args]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)


def _spinners_left() -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"bench.slow_cpu" in argv and b"--spinner" in argv:
                found.append(pid)
    return found


def test_the_command_runs_beside_one_realtime_spinner_pinned_to_each_cpu() -> None:
    done = _run("--steal", "0.1", "--", sys.executable, "-c", INSPECT_SPINNERS)

    assert done.returncode == 7, done.stderr  # the command's own exit code
    spinners, handed = done.stdout.splitlines()
    cpus = sorted(os.sched_getaffinity(0))
    assert spinners == str([(cpu, True, True) for cpu in cpus])
    assert handed.startswith("steal=0.1 period_ms=1 slowdown=")
    assert f"bench.slow_cpu: {len(cpus)} CPUs, 10% of each 1 ms taken" in done.stderr
    assert _spinners_left() == []


def test_asked_for_a_busy_loop_it_finds_a_share_and_hands_both_on() -> None:
    show = "import os; print(os.environ['BENCH_SLOW_CPU'])"

    done = _run("--busy-loop-ms", "150", "--", sys.executable, "-c", show)

    assert done.returncode == 0, done.stderr
    fields = dict(field.split("=") for field in done.stdout.split())
    assert fields["asked_ms"] == "150"
    assert slow_cpu.MIN_STEAL <= float(fields["steal"]) <= slow_cpu.MAX_STEAL
    assert float(fields["slowdown"]) > 1 and float(fields["busy_loop_ms"]) > 0
    assert _spinners_left() == []


def test_a_busy_loop_it_cannot_reach_by_slowing_is_refused() -> None:
    done = _run("--busy-loop-ms", "1", "--", "touch", "/nonexistent/never")
    assert done.returncode == 2
    assert "too close to the 1 ms asked to slow it down" in done.stderr
    assert _spinners_left() == []


def test_the_spinners_end_when_their_parent_is_killed() -> None:
    command = [sys.executable, "-m", "bench.slow_cpu", "--steal", "0.1", "--", "sleep", "20"]
    parent = subprocess.Popen(command, cwd=ROOT, stderr=subprocess.PIPE)
    stderr = parent.stderr
    assert stderr is not None
    try:
        stderr.readline()  # the slowdown line: the spinners run
        assert len(_spinners_left()) == len(os.sched_getaffinity(0))
    finally:
        parent.kill()  # no clean-up of its own: the spinners must see it gone
        parent.wait()
        stderr.close()
    deadline = time.monotonic() + 10
    while _spinners_left() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _spinners_left() == []


def test_without_the_right_to_a_realtime_policy_it_says_so_and_runs_nothing(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "ran"
    no_nice = ["setpriv", "--inh-caps=-sys_nice", "--bounding-set=-sys_nice"]

    done = _run("--", "touch", str(marker), preexec=no_nice)

    assert done.returncode == 2
    assert "need a real-time policy (SCHED_FIFO), which needs CAP_SYS_NICE" in done.stderr
    assert "Traceback" not in done.stderr
    assert not marker.exists()
    assert _spinners_left() == []


def test_out_of_range_settings_and_a_missing_command_are_refused() -> None:
    too_much = _run("--steal", "0.95", "--", "true")
    assert too_much.returncode == 2 and "--steal must be between 0.05 and 0.9" in too_much.stderr
    period = _run("--period-ms", "50", "--", "true")
    assert period.returncode == 2 and "--period-ms must be between 0.1 and 10" in period.stderr
    both = _run("--steal", "0.5", "--busy-loop-ms", "100", "--", "true")
    assert both.returncode == 2 and "not allowed with argument" in both.stderr
    loop = _run("--busy-loop-ms", "0", "--", "true")
    assert loop.returncode == 2 and "--busy-loop-ms must be between 1 and 10000" in loop.stderr
    nothing = _run("--steal", "0.5")
    assert nothing.returncode == 2 and "give the command to run after --" in nothing.stderr


def test_the_streaming_report_names_the_slowing_beside_the_cpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(slow_cpu.ENV, raising=False)
    plain = streaming.cpu()
    assert plain["slowed"] is None and "slowed" not in streaming.cpu_line(plain)

    monkeypatch.setenv(slow_cpu.ENV, "steal=0.6 period_ms=1 slowdown=2.21")
    slowed = streaming.cpu()
    assert streaming.cpu_line(slowed).endswith(
        "slowed by `bench.slow_cpu` (steal=0.6 period_ms=1 slowdown=2.21)"
    )

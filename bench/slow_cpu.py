"""Run a command on a slower CPU: this machine's cores, each partly taken by a spinner.

Latency under load moves with the CPU (docs/benchmarks.md, section 3f: the slowest CPU met,
AMD EPYC 23/1, missed a goal the others met), and the slowest CPU is seldom the one at hand. A
heavier load on a fast CPU is a poor stand-in: its callbacks stay short. This makes every core
slower for everything that runs on it, the system measured, its database and the benchmark's
own client alike: one spinner per core, pinned to it, at the lowest real-time priority (so it
runs ahead of every ordinary process), busy for `steal` of each `period` and asleep for the
rest. What is left of each core runs ordinary work at full speed in slices of the period: at
`--steal 0.6` a 2 ms callback takes up to 5 ms of wall time; a Python busy loop measures 1.9-2.2
times slower here (a spinner's sleep and wake-up give some of its share back), about the
slowest CPU met (docs/benchmarks.md, section 3p: section 3f's code gave 43.1 ms here against
43.0 and 54.4 on AMD EPYC 23/1).

    sudo python -m bench.slow_cpu --busy-loop-ms 67 -- python -m bench.peers --workloads streaming

A real-time policy needs CAP_SYS_NICE (root). The kernel keeps 5% of each second for ordinary
work whatever real-time threads ask (`kernel.sched_rt_runtime_us`), hence `--steal` at most
0.9. Before the command, a busy loop is timed with and without the spinners: the slowdown
measured is printed, and handed to the command in `BENCH_SLOW_CPU` (`bench.peers` records it
beside the CPU's model). What a share does moves with the host's own load, and so does the
speed of the machine itself: `--busy-loop-ms 67` looks for the share that makes the busy loop (a
million additions in Python, `busy_loop_s`) take that long first (a few seconds): a fixed speed,
whatever the host does.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Sequence

ENV = "BENCH_SLOW_CPU"
REALTIME_PRIORITY = 1  # the lowest: ahead of every ordinary (SCHED_OTHER) thread
DEFAULT_STEAL = 0.6
MIN_STEAL, MAX_STEAL = 0.05, 0.9
MIN_SLOWDOWN = 1.1  # `--busy-loop-ms` must ask for at least this much slower than the loop now
PARENT_CHECK_S = 0.1  # how often a spinner looks whether its parent is still there
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_PROBE = f"import os; os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param({REALTIME_PRIORITY}))"


class CannotSlow(RuntimeError):
    """The spinners cannot run as real-time threads here."""


def spin(cpu: int, steal: float, period_s: float) -> None:
    """A spinner's life: on `cpu`, busy for `steal` of every `period_s`, until killed or its
    parent is gone (a real-time spinner left behind would take a core's share for good)."""
    parent = os.getppid()
    os.sched_setaffinity(0, {cpu})
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(REALTIME_PRIORITY))
    clock = time.perf_counter
    busy = period_s * steal
    checks_every = max(1, int(PARENT_CHECK_S / period_s))
    start = clock()
    periods = 0
    while True:
        periods += 1
        if periods % checks_every == 0 and os.getppid() != parent:
            return
        busy_until = start + busy
        while clock() < busy_until:
            pass
        start += period_s
        idle = start - clock()
        if idle > 0:
            time.sleep(idle)
        else:  # preempted past a whole period (throttled): start again from now
            start = clock()


def check_realtime() -> None:
    """Raise `CannotSlow` unless this process may make a real-time thread."""
    probe = subprocess.run(
        [sys.executable, "-c", _PROBE],
        capture_output=True,
        text=True,
        check=False,
    )
    if probe.returncode != 0:
        why = (probe.stderr.strip().splitlines() or ["refused"])[-1]
        raise CannotSlow(
            f"the spinners need a real-time policy (SCHED_FIFO), which needs CAP_SYS_NICE: {why}"
        )


class Spinners:
    """One spinner process per CPU this process may run on; `stop` ends them all."""

    def __init__(self, steal: float, period_s: float) -> None:
        self.steal = steal
        self.period_s = period_s
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self) -> None:
        for cpu in sorted(os.sched_getaffinity(0)):
            command = [sys.executable, "-m", "bench.slow_cpu", "--spinner", str(cpu)]
            command += ["--steal", str(self.steal), "--period-ms", str(self.period_s * 1000)]
            self.procs.append(subprocess.Popen(command, cwd=ROOT))
        time.sleep(0.2)  # each has set its policy before anything is timed
        for proc in self.procs:
            if proc.poll() is not None:
                self.stop()
                raise CannotSlow(f"a spinner stopped at once (exit code {proc.returncode})")

    def stop(self) -> None:
        for proc in self.procs:
            proc.kill()
        for proc in self.procs:
            proc.wait()
        self.procs.clear()


def busy_loop_s(rounds: int = 5, n: int = 1_000_000) -> float:
    """The median time of a pure-Python busy loop (what a slower CPU shows at once)."""
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        total = 0
        for i in range(n):
            total += i
        times.append(time.perf_counter() - started)
    return sorted(times)[len(times) // 2]


def busy_loop_with(steal: float, period_s: float) -> float:
    """The busy loop's time beside spinners taking `steal`."""
    spinners = Spinners(steal, period_s)
    spinners.start()
    try:
        return busy_loop_s()
    finally:
        spinners.stop()


def find_steal(loop_s: float, period_s: float, steps: int = 6) -> float:
    """The share to take for a busy loop of `loop_s` (bisection): the host's own load changes
    what a given share does (1.5x to 2.6x slower at 0.6 on one machine in one afternoon), so a
    run that must be compared with another asks for a speed, not a share."""
    low, high = MIN_STEAL, MAX_STEAL
    for _ in range(steps):
        steal = (low + high) / 2
        if busy_loop_with(steal, period_s) < loop_s:
            low = steal
        else:
            high = steal
    return round((low + high) / 2, 3)


def run(command: Sequence[str], steal: float | None, period_s: float, loop_ms: float | None) -> int:
    """`command` with the spinners running (taking `steal`, or the share found for a busy loop
    of `loop_ms`, else the default share); its exit code."""
    check_realtime()
    plain = busy_loop_s()
    if loop_ms is not None:
        if loop_ms / 1000 < plain * MIN_SLOWDOWN:
            raise CannotSlow(
                f"the busy loop takes {plain * 1000:.0f} ms here already: too close to the "
                f"{loop_ms:g} ms asked to slow it down"
            )
        steal = find_steal(loop_ms / 1000, period_s)
    if steal is None:
        steal = DEFAULT_STEAL
    spinners = Spinners(steal, period_s)
    spinners.start()
    try:
        slowed = busy_loop_s()
        slowdown = slowed / plain
        print(
            f"bench.slow_cpu: {len(spinners.procs)} CPUs, {steal:.0%} of each "
            f"{period_s * 1000:g} ms taken; a busy loop {plain * 1000:.0f} ms -> "
            f"{slowed * 1000:.0f} ms: {slowdown:.2f}x slower",
            file=sys.stderr,
            flush=True,
        )
        env = dict(os.environ)
        env[ENV] = f"steal={steal} period_ms={period_s * 1000:g} slowdown={slowdown:.2f}"
        env[ENV] += f" busy_loop_ms={slowed * 1000:.0f}"
        if loop_ms is not None:
            env[ENV] += f" asked_ms={loop_ms:g}"
        try:
            return subprocess.run(list(command), env=env, check=False).returncode
        except KeyboardInterrupt:
            return 130
    finally:
        spinners.stop()


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.slow_cpu",
        description="Run a command with every core partly taken, as on a slower CPU.",
    )
    how = parser.add_mutually_exclusive_group()
    how.add_argument(
        "--steal",
        type=float,
        help=f"the share of each core taken, {MIN_STEAL}-{MAX_STEAL} (default {DEFAULT_STEAL}: "
        "about 2x slower)",
    )
    how.add_argument(
        "--busy-loop-ms",
        type=float,
        help="find the share that makes the busy loop take this long: a speed that does not "
        "move with the host's load (AMD EPYC 23/1: about 67, section 3p)",
    )
    parser.add_argument("--period-ms", type=float, default=1.0, help="0.1-10")
    parser.add_argument("--spinner", type=int, help=argparse.SUPPRESS)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    options = parser.parse_args(list(argv))
    if options.steal is not None and not MIN_STEAL <= options.steal <= MAX_STEAL:
        parser.error(
            f"--steal must be between {MIN_STEAL} and {MAX_STEAL} "
            "(the kernel keeps 5% for the rest)"
        )
    if options.busy_loop_ms is not None and not 1 <= options.busy_loop_ms <= 10_000:
        parser.error("--busy-loop-ms must be between 1 and 10000")
    if not 0.1 <= options.period_ms <= 10:
        parser.error("--period-ms must be between 0.1 and 10")
    if options.command[:1] == ["--"]:
        options.command = options.command[1:]
    if options.spinner is None and not options.command:
        parser.error("give the command to run after --")
    return options


def main(argv: Sequence[str] | None = None) -> int:
    options = parse(sys.argv[1:] if argv is None else argv)
    period_s = options.period_ms / 1000
    if options.spinner is not None:
        spin(options.spinner, options.steal or DEFAULT_STEAL, period_s)
        return 0
    try:
        return run(options.command, options.steal, period_s, options.busy_loop_ms)
    except CannotSlow as problem:
        print(f"bench.slow_cpu: {problem}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

"""What a callback costs on `pressloop serve`'s loop (`LanesLoop`) beside asyncio's and uvloop's.

Every callback the lanes loop runs passes through its ready queue's `append` and `popleft`,
written in Python (`pressloop/runtime/loop_lanes.py`); on a CPU where the machine is full while
the first tokens come, that bookkeeping is CPU the tokens wait behind (docs/benchmarks.md,
section 3p). Here N tasks each resolve a future and step again, on each loop in turn, a few
rounds interleaved; the CPU time of the thread, per callback run, median over the rounds:

    python -m bench.loop_lanes [--tasks 200] [--steps 500] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable

import uvloop

from pressloop.runtime.loop_lanes import LanesLoop, urgent

CALLBACKS_A_STEP = 3  # set_result, the task's wakeup, the step after sleep(0)


async def _steps(steps: int) -> None:
    loop = asyncio.get_running_loop()
    for _ in range(steps):
        future = loop.create_future()
        loop.call_soon(future.set_result, None)
        await future
        await asyncio.sleep(0)


async def _urgent_steps(steps: int) -> None:
    with urgent():
        await _steps(steps)


async def _run(tasks: int, steps: int, with_urgent: bool) -> float:
    started = time.thread_time()
    work = [asyncio.create_task(_steps(steps)) for _ in range(tasks)]
    if with_urgent:  # one task marked urgent, as while a turn reads a model's stream
        work.append(asyncio.create_task(_urgent_steps(steps)))
    await asyncio.gather(*work)
    return time.thread_time() - started


CASES: dict[str, tuple[Callable[[], asyncio.AbstractEventLoop], bool]] = {
    "asyncio (SelectorEventLoop)": (asyncio.SelectorEventLoop, False),
    "Pressloop lanes (LanesLoop)": (LanesLoop, False),
    "Pressloop lanes, one task urgent": (LanesLoop, True),
    "uvloop": (uvloop.new_event_loop, False),
}


def measure(tasks: int, steps: int, rounds: int) -> dict[str, list[float]]:
    """Microseconds of CPU per callback, per case, one figure a round (cases interleaved)."""
    results: dict[str, list[float]] = {name: [] for name in CASES}
    for _ in range(rounds):
        for name, (factory, with_urgent) in CASES.items():
            runs = tasks + (1 if with_urgent else 0)
            with asyncio.Runner(loop_factory=factory) as runner:
                seconds = runner.run(_run(tasks, steps, with_urgent))
            results[name].append(seconds * 1e6 / (runs * steps * CALLBACKS_A_STEP))
    return results


def table(results: dict[str, list[float]]) -> str:
    base = statistics.median(results["asyncio (SelectorEventLoop)"])
    lines = [
        "| loop | CPU a callback (us), median (min-max) | vs asyncio |",
        "|---|---|---|",
    ]
    for name, figures in results.items():
        median = statistics.median(figures)
        lines.append(
            f"| {name} | {median:.2f} ({min(figures):.2f}-{max(figures):.2f}) | "
            f"{median / base:.2f}x |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.loop_lanes", description=__doc__)
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args(argv)
    print(table(measure(options.tasks, options.steps, options.rounds)))


if __name__ == "__main__":
    main()

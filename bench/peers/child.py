"""One system on one database in its own process: its memory is then the system's alone, and a
crash test can kill it.

Sequential workloads (overhead, growth, the floors) are driven line by line on stdin, so that the
parent can interleave the systems in blocks of turns: every system then samples the same
stretches of a machine that other work keeps busy. Commands, each answered by one line:

    warmup N          N turns, not kept                                  -> DONE
    measure LABEL N   N timed turns, each followed by its floor           -> DONE
    fill SIZE         (growth) copies of one real turn up to SIZE stored  -> DONE <seconds>
    result            everything measured, as JSON                        -> RESULT {...}

One-shot workloads print `RESULT {...}` and exit: `concurrency` (N turns at once, for each N
of --sizes, smallest first), `bare-concurrency` (the client alone), `crash-run` (a turn the
model never finishes), `crash-resume` (the system's own resume of that turn).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import resource
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench.peers import prefill, profiling
from bench.peers.bare import BareCommit, BareModel
from bench.peers.system import MESSAGE, System, Target, load


def memory_mb() -> dict[str, float]:
    """Resident memory now and at its peak (VmHWM), MiB."""
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        name, _sep, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = int(value.split()[0]) / 1024
    return {"rss": fields["VmRSS"], "peak": fields["VmHWM"]}


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def say(line: str) -> None:
    print(line, flush=True)


class Sequential:
    """Turns one after another, each on a new thread (made outside the timed span), each
    followed by the bare model turn it is compared with."""

    def __init__(self, system: System | None, target: Target) -> None:
        self.system = system
        self.target = target
        self.bare = BareModel(target.model_url)
        self.commit: BareCommit | None = None
        self.samples: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        self.cpu: dict[str, float] = defaultdict(float)
        self.memory_before: dict[str, float] | None = None
        self.template: prefill.Template | None = None
        self.stored = 0

    async def open(self) -> None:
        if self.system is not None:
            await self.system.open(self.target)
        else:  # the floors
            self.commit = BareCommit(self.target.sqlalchemy_url())
            await self.commit.prepare()

    async def turn(self, label: str | None) -> None:
        if self.system is None:
            assert self.commit is not None
            sample = {
                "commit_s": await self.commit.commit(),
                "model_s": await self.bare.turn(stream=False),
                "model_stream_s": await self.bare.turn(stream=True),
            }
        else:
            thread = await self.system.new_thread()
            started = time.perf_counter()
            await self.system.turn(thread, MESSAGE)
            sample = {"turn_s": time.perf_counter() - started}
            if label is not None:
                sample["floor_s"] = await self.bare.turn(stream=self.system.streams)
            self.stored += 1
        if label is not None:
            for key, value in sample.items():
                self.samples[label][key].append(value)

    async def command(self, words: list[str]) -> str:
        if words[0] == "warmup":
            for _ in range(int(words[1])):
                await self.turn(None)
            return "DONE"
        if words[0] == "measure":
            if self.memory_before is None:
                gc.collect()
                self.memory_before = memory_mb()
            cpu = cpu_s()
            for _ in range(int(words[2])):
                await self.turn(words[1])
            self.cpu[words[1]] += cpu_s() - cpu
            return "DONE"
        if words[0] == "fill":
            return f"DONE {await self.fill(int(words[1])):.3f}"
        raise ValueError(f"unknown command {words}")

    async def fill(self, size: int) -> float:
        """Copy one real turn until `size` conversations are stored (the turns measured so far
        count: they are history too)."""
        assert self.system is not None
        if self.template is None:
            thread = await self.system.new_thread()
            await self.system.turn(thread, MESSAGE)
            self.template = await prefill.snapshot(self.target, self.system.clone_excluded)
            self.stored += 1
        started = time.perf_counter()
        missing = size - self.stored
        await prefill.clone(self.target, self.template, start=self.stored, count=missing)
        self.stored += max(0, missing)
        return time.perf_counter() - started

    def result(self) -> dict[str, Any]:
        return {
            "samples": self.samples,
            "cpu_s": self.cpu,
            "memory_before": self.memory_before,
            "memory": memory_mb(),
            "rows_per_copy": self.template.rows_per_copy() if self.template else None,
        }

    async def close(self) -> None:
        if self.system is not None:
            await self.system.close()
        if self.commit is not None:
            await self.commit.close()
        await self.bare.close()


async def driven(system: System | None, target: Target, profile: str = "") -> None:
    runner = Sequential(system, target)
    profiler = None
    started = time.perf_counter()
    await runner.open()
    say(f"READY {time.perf_counter() - started:.3f}")
    try:
        while True:
            line = await asyncio.to_thread(sys.stdin.readline)
            words = line.split()
            if not words or words[0] == "result":
                if profiler is not None:
                    profiling.stop(profiler, Path(profile))
                say("RESULT " + json.dumps(runner.result()))
                return
            if profile and profiler is None and words[0] == "measure":
                profiler = profiling.start()  # the measured turns only
            say(await runner.command(words))
    finally:
        await runner.close()


async def concurrency(system: System, turns: int) -> dict[str, Any]:
    """`turns` turns started at once (on the 1 s model), in this one process."""
    threads = [await system.new_thread() for _ in range(turns)]
    gc.collect()
    before, cpu = memory_mb(), cpu_s()
    started = time.perf_counter()
    outcomes = await asyncio.gather(
        *(system.turn(thread, MESSAGE) for thread in threads), return_exceptions=True
    )
    wall = time.perf_counter() - started
    errors = [repr(o) for o in outcomes if isinstance(o, BaseException)]
    return {
        "wall_s": wall,
        "succeeded": turns - len(errors),
        "errors": errors[:3],
        "cpu_s": cpu_s() - cpu,
        "memory_before": before,
        "memory": memory_mb(),  # the peak is the process's so far: sizes run smallest first
    }


async def bare_concurrency(model_url: str, sizes: list[int]) -> dict[str, Any]:
    """The client alone: N bare model turns at once, plain then streamed, then streamed on the
    SDK's aiohttp transport, for each N."""
    default, on_aiohttp = BareModel(model_url), BareModel(model_url, aiohttp=True)
    result: dict[str, Any] = {}
    for n in sizes:
        for suffix, bare, stream in (
            ("", default, False),
            ("-stream", default, True),
            ("-stream-aiohttp", on_aiohttp, True),
        ):
            started, cpu = time.perf_counter(), cpu_s()
            await asyncio.gather(*(bare.turn(stream=stream) for _ in range(n)))
            wall = time.perf_counter() - started
            result[f"{n}{suffix}"] = {
                "wall_s": wall,
                "cpu_s": cpu_s() - cpu,
                "memory": memory_mb(),
            }
    await default.close()
    await on_aiohttp.close()
    return result


async def one_shot(options: argparse.Namespace, target: Target) -> dict[str, Any]:
    if options.workload == "bare-concurrency":
        return await bare_concurrency(target.model_url, options.sizes)
    system = load(options.system)
    await system.open(target)
    message = f"{MESSAGE} [probe:{options.probe}]" if options.probe else MESSAGE
    try:
        if options.workload == "concurrency":
            # One turn first: what a system loads lazily (Pressloop: the model SDKs) is loaded
            # before the clock starts, as it is for the peers when they are built.
            await system.turn(await system.new_thread(), MESSAGE)
            profiler = profiling.start() if options.profile else None
            result = {str(n): await concurrency(system, n) for n in sorted(options.sizes)}
            if profiler is not None:
                profiling.stop(profiler, Path(options.profile))
            return result
        if options.workload == "crash-run":
            # The model server holds one request of this turn until the process is killed.
            thread = await system.new_thread()
            say(f"THREAD {thread}")
            await system.turn(thread, message)
            return {"unexpected": "the held turn finished"}
        if options.workload == "crash-resume":
            await system.resume(options.thread, message)
            return {"resumed": True}
    finally:
        await system.close()
    raise SystemExit(f"unknown workload {options.workload}")


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--system", default="", help="a system key, or 'floor'")
    parser.add_argument("--workload", default="driven")
    parser.add_argument("--target", required=True, help="a Target as JSON")
    parser.add_argument("--sizes", type=lambda text: [int(n) for n in text.split(",")])
    parser.add_argument("--thread", default="")
    parser.add_argument("--probe", default="", help="marks the turn's requests (crash test)")
    parser.add_argument("--profile", default="", help="save a pyinstrument session here")
    return parser.parse_args(argv)


async def main(options: argparse.Namespace) -> None:
    target = Target(**json.loads(options.target))
    if options.workload == "driven":
        system = None if options.system == "floor" else load(options.system)
        await driven(system, target, options.profile)
        return
    say("RESULT " + json.dumps(await one_shot(options, target)))


if __name__ == "__main__":
    asyncio.run(main(parse(sys.argv[1:])))

"""Workload 2 (N turns at once on the 1 s model, in one process) and the crash test (what a
system resumes from when its process is killed in the middle of a turn)."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.peers.model_server import base_url
from bench.peers.procs import fresh_target, one_shot, start_child
from bench.peers.sequential import Context
from bench.peers.system import ROUNDS

LATENCY_MS = 1000
HELD_ROUND = 2  # the crash comes while the model answers round 3 (2 tool results sent)
# A crashed Pressloop run is reclaimed when its lease expires: short leases, so the test does
# not wait the default 30 s (both are settings: PRESSLOOP_LEASE_TTL, PRESSLOOP_LEASE_RENEW).
CRASH_ENV = {"PRESSLOOP_LEASE_TTL": "2", "PRESSLOOP_LEASE_RENEW": "0.5"}


async def profile_concurrency(ctx: Context, database: str, n: int, path: Path) -> None:
    """Pressloop alone, N turns at once, under pyinstrument."""
    slow = base_url(ctx.model_port, latency_ms=LATENCY_MS)
    async with fresh_target(database, ctx.admin_url, ctx.data_dir, slow) as target:
        log = ctx.log(f"profile-concurrency-{database}")
        more = ["--workload", "concurrency", "--sizes", str(n), "--profile", str(path)]
        await one_shot("pressloop", target, log, *more)


async def concurrency(
    ctx: Context, keys: list[str], database: str, sizes: list[int]
) -> dict[str, Any]:
    """The bare client (N bare model turns at once, plain, streamed, and streamed on the SDK's
    aiohttp transport), then each system in
    its own process on a fresh database, running N turns at once for each N, smallest first
    (the process's peak memory is then the peak of the largest N so far)."""
    slow = base_url(ctx.model_port, latency_ms=LATENCY_MS)
    more = ["--sizes", ",".join(str(n) for n in sorted(sizes))]
    async with fresh_target(database, ctx.admin_url, ctx.data_dir, slow) as target:
        log = ctx.log(f"concurrency-bare-{database}")
        bare = await one_shot("floor", target, log, "--workload", "bare-concurrency", *more)
    by_system: dict[str, Any] = {}
    for key in keys:
        async with fresh_target(database, ctx.admin_url, ctx.data_dir, slow) as target:
            log = ctx.log(f"concurrency-{key}-{database}")
            by_system[key] = await one_shot(key, target, log, "--workload", "concurrency", *more)
    results: dict[str, Any] = {}
    for n in sorted(sizes):
        row = {
            "bare": bare[str(n)],
            "bare-stream": bare[f"{n}-stream"],
            "bare-stream-aiohttp": bare[f"{n}-stream-aiohttp"],
        }
        results[str(n)] = row | {key: by_system[key][str(n)] for key in keys}
    return {"latency_s": LATENCY_MS / 1000, "ideal_s": (ROUNDS + 1) * LATENCY_MS / 1000, **results}


def _stats(port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats", timeout=10) as response:
        stats: dict[str, Any] = json.load(response)
    return stats


async def _held(port: int, probe: str) -> None:
    """Return once the model server holds the probed turn's round-3 request."""
    for _ in range(2400):
        if HELD_ROUND in (await asyncio.to_thread(_stats, port))["probes"].get(probe, []):
            return
        await asyncio.sleep(0.05)
    raise TimeoutError(f"the model server never saw round 3 of {probe}")


async def crash(ctx: Context, key: str, database: str) -> dict[str, Any]:
    """Kill the system's process (SIGKILL) while the model is answering round 3, then resume
    the turn the system's own way in a new process. The model server counts the tool results
    each request carries: the first request after the restart tells where the turn resumed."""
    probe = f"{key}-{database}"
    holding = base_url(ctx.model_port, hold=HELD_ROUND)
    async with fresh_target(database, ctx.admin_url, ctx.data_dir, holding) as target:
        log = ctx.log(f"crash-{key}-{database}")
        more = ["--probe", probe]
        child = await start_child(key, target, log, "--workload", "crash-run", *more, env=CRASH_ENV)
        try:
            thread = await child.line("THREAD", timeout_s=300)
            await _held(ctx.model_port, probe)
            # A real model takes a second or more to answer: give writes a system makes while
            # the model works (LangGraph's async durability) the time they would have.
            await asyncio.sleep(0.5)
        finally:
            child.kill()
            await child.wait()
        resumed = replace(target, model_url=base_url(ctx.model_port))
        more += ["--workload", "crash-resume", "--thread", thread]
        try:
            await one_shot(key, resumed, log, *more, env=CRASH_ENV)
            error = None
        except RuntimeError as failed:
            error = str(failed).splitlines()[-1][:200]
    seen = (await asyncio.to_thread(_stats, ctx.model_port))["probes"].get(probe, [])
    cut = seen.index(HELD_ROUND) + 1
    after = seen[cut:]
    return {
        "requests_before": seen[:cut],
        "requests_after": after,
        "resumed_at_round": after[0] + 1 if after else None,
        "rounds_repeated": HELD_ROUND - after[0] if after else None,
        "error": error,
    }

"""Workloads 1 (overhead per round) and 4 (growth with history): sequential turns, every system
in its own child process on its own fresh database, interleaved in blocks of turns so that all
of them (and the floors) sample the same stretches of a shared, busy machine."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.peers.model_server import base_url
from bench.peers.procs import Process, fresh_target, start_child


@dataclass(kw_only=True)
class Context:
    admin_url: str
    data_dir: Path
    log_dir: Path
    model_port: int
    # Streaming: `pressloop serve` as this many processes on its port (PRESSLOOP_SERVE_PROCESSES).
    serve_processes: int = 1
    # Streaming: more settings of `pressloop serve`, for an experiment (`--pressloop-env`).
    pressloop_env: dict[str, str] = field(default_factory=dict)
    # Streaming: Pressloop's model calls through a relay that notes when it read each first token
    # (`--model-relay`, token_relay.py).
    model_relay: bool = False

    def log(self, name: str) -> Path:
        return self.log_dir / f"{name}.log"


async def _start(
    stack: AsyncExitStack,
    ctx: Context,
    keys: list[str],
    database: str,
    tag: str,
    profile: Path | None = None,
) -> dict[str, Process]:
    children: dict[str, Process] = {}
    for key in keys:
        target = await stack.enter_async_context(
            fresh_target(database, ctx.admin_url, ctx.data_dir, base_url(ctx.model_port))
        )
        more = ["--profile", str(profile)] if profile is not None else []
        child = await start_child(key, target, ctx.log(f"{tag}-{key}-{database}"), *more)
        stack.push_async_callback(child.stop)
        children[key] = child
    await asyncio.gather(*(c.line("READY", timeout_s=300) for c in children.values()))
    return children


async def interleave(children: list[Process], label: str, turns: int, block: int) -> None:
    """`turns` measured turns on every child, `block` at a time each, the order rotating so
    that no system always runs right after the same other one."""
    order = list(children)
    done = 0
    while done < turns:
        count = min(block, turns - done)
        for child in order:
            await child.send(f"measure {label} {count}")
        order = order[1:] + order[:1]
        done += count


async def overhead(
    ctx: Context,
    keys: list[str],
    database: str,
    *,
    turns: int,
    warmup: int,
    block: int,
    profile: Path | None = None,
) -> dict[str, dict[str, Any]]:
    """Workload 1: `turns` turns per system, plus the floors ('floor': the bare durable commit
    and the bare model turns). With `profile` (one system), no floors."""
    async with AsyncExitStack() as stack:
        keys = keys if profile is not None else ["floor", *keys]
        children = await _start(stack, ctx, keys, database, "overhead", profile)
        for child in children.values():
            await child.send(f"warmup {warmup}")
        await interleave(list(children.values()), "main", turns, block)
        return {key: await child.result() for key, child in children.items()}


async def growth(
    ctx: Context,
    keys: list[str],
    database: str,
    *,
    sizes: list[int],
    turns: int,
    warmup: int,
    block: int,
    profile: Path | None = None,
) -> dict[str, dict[str, Any]]:
    """Workload 4: for each size, every system's store is filled up to that many
    conversations (copies of one real turn), then `turns` turns are measured on each."""
    async with AsyncExitStack() as stack:
        children = await _start(stack, ctx, keys, database, "growth", profile)
        fills: dict[str, dict[str, float]] = {key: {} for key in keys}
        for size in sizes:
            for key, child in children.items():
                fills[key][str(size)] = float(await child.send(f"fill {size}", expect="DONE"))
                await child.send(f"warmup {warmup}")
            await interleave(list(children.values()), f"size{size}", turns, block)
        results = {key: await child.result() for key, child in children.items()}
    for key, result in results.items():
        result["fill_s"] = fills[key]
    return results

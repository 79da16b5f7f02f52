"""Workload 3: N concurrent streamed chat turns through each system's HTTP serving path.

Pressloop is the real `pressloop serve` (API, in-process worker and scheduler; `POST
/v1/threads/{id}/runs` with `mode: stream`); each peer is behind the same minimal FastAPI SSE
app (sse_app.py). The model is the 1 s model, its final text streamed a token every 10 ms. Its
first token carries the model server's CLOCK_MONOTONIC time taken just before it was written;
the client reads the clock again when it has parsed the first SSE frame carrying that token:
the difference is the time the token took to cross the system.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import aiohttp
import httpx

from bench import slow_cpu
from bench.peers import profiling
from bench.peers.model_server import STAMP, base_url
from bench.peers.procs import Process, fresh_target
from bench.peers.sequential import Context
from bench.peers.server_usage import served_cpu_s, served_rss_mb
from bench.peers.system import MESSAGE, ROUNDS, Target

LATENCY_MS = 1000
GAP_MS = 10
WARMUP = 2  # streams run (and not counted) before the measured ones


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def _pressloop_server(
    target: Target,
    port: int,
    log: Path,
    profile: Path | None,
    processes: int = 1,
    settings: dict[str, str] | None = None,
) -> tuple[Process, str]:
    env = {
        "PRESSLOOP_SERVE_PROCESSES": str(processes),
        "PRESSLOOP_DATA_DIR": target.data_dir,
        "PRESSLOOP_DATABASE_URL": target.sqlalchemy_url(),
        "PRESSLOOP_PROVIDER": "openai-compatible",
        "PRESSLOOP_BASE_URL": target.model_url,
        "PRESSLOOP_ACTION_PACKS": "bench.noop_pack",
        # A benchmark sends hundreds of turns a minute as one user.
        "PRESSLOOP_COOLDOWN": "0",
        "PRESSLOOP_BUDGET_USER_ACTIONS": "0",
        "PRESSLOOP_BUDGET_USER_TOKENS": "0",
        "PRESSLOOP_BUDGET_SITE_ACTIONS": "0",
        "PRESSLOOP_BUDGET_SITE_TOKENS": "0",
        **(settings or {}),
    }
    serve = ["serve", "--host", "127.0.0.1", "--port", str(port), "--no-local-wordpress"]
    if profile is not None:
        args = profiling.command(profile, "pressloop.cli", serve)
    else:
        args = [str(Path(sys.executable).parent / "pressloop"), *serve]
    kind = "pressloop" if processes == 1 else f"pressloop-{processes}"
    return await Process.start(args, name="pressloop serve", log=log, env=env), kind


async def _peer_server(key: str, target: Target, port: int, log: Path) -> tuple[Process, str]:
    import json

    args = [sys.executable, "-m", "bench.peers.sse_app", "--system", key]
    args += ["--target", json.dumps(asdict(target)), "--port", str(port)]
    return await Process.start(args, name=f"{key} sse_app", log=log), "peer"


async def _ready(client: httpx.AsyncClient, server: Process) -> None:
    async with asyncio.timeout(180):
        while True:
            if server.proc.returncode is not None:
                raise RuntimeError(f"{server.name} stopped: {server.log.read_text()[-2000:]}")
            try:
                if (await client.get("/healthz")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.2)


async def _one_stream(
    session: aiohttp.ClientSession, url: str, body: dict[str, Any], headers: dict[str, str]
) -> dict[str, Any]:
    first_ms: float | None = None
    stamp_ns: int | None = None
    finished = False
    started = time.perf_counter()
    async with session.post(url, json=body, headers=headers) as response:
        response.raise_for_status()
        async for raw in response.content:  # one line at a time
            line = raw.rstrip(b"\r\n")
            if first_ms is None and line.startswith(b"data:"):
                found = STAMP.search(line.decode())
                if found:
                    stamp_ns = int(found.group(1))
                    first_ms = (time.monotonic_ns() - stamp_ns) / 1e6
            elif line in (b"event: run.finished", b"event: done", b"data: [DONE]"):
                finished = True
    return {
        "first_ms": first_ms,
        "stamp_ns": stamp_ns,
        "finished": finished,
        "turn_s": time.perf_counter() - started,
    }


def _client_session(streams: int) -> aiohttp.ClientSession:
    """The streams' client: aiohttp, every stream on its own kept-alive connection.

    The client must never be what is measured. httpx (the client of the first runs) spends
    so much CPU a line that, with 200 streams a token every 10 ms each, it fell behind by
    itself: the model server straight to that client, no system between, gave a first-frame
    p99 of 728-1,298 ms (3 runs, AMD EPYC); aiohttp 3.5-11 ms (`FLOORS["direct"]` measures it
    in every run).
    """
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=streams + 20),
        timeout=aiohttp.ClientTimeout(total=300),
    )


async def _streams(
    urls: list[str],
    body: dict[str, Any],
    headers: dict[str, str],
    streams: int,
    server_cpu: Callable[[], dict[str, float]] | None = None,
) -> tuple[list[Any], float, dict[str, float] | None]:
    """The measured streams, all at once, after WARMUP unmeasured ones (a first turn loads what
    a server loads lazily: Pressloop, the model SDK); with `server_cpu`, the server's CPU
    seconds over the measured streams too (its start and the warm-up left out)."""
    async with _client_session(streams) as session:
        warm, measured = urls[:WARMUP], urls[WARMUP:]
        await asyncio.gather(*(_one_stream(session, url, body, headers) for url in warm))
        cpu_before = server_cpu() if server_cpu else None
        started = time.perf_counter()
        outcomes = await asyncio.gather(
            *(_one_stream(session, url, body, headers) for url in measured),
            return_exceptions=True,
        )
        wall = time.perf_counter() - started
        if server_cpu is None or cpu_before is None:
            return outcomes, wall, None
        cpu_after = server_cpu()
        return outcomes, wall, {role: cpu_after[role] - cpu_before[role] for role in cpu_after}


def cpu() -> dict[str, Any]:
    """What the streaming figures were measured on: the CPU model (with its family, model and
    stepping: a virtual machine's model name is often just "Intel(R) Xeon(R) Processor"), its
    clock, the CPUs this process may run on, and whether `bench.slow_cpu` slowed them."""
    fields: dict[str, str] = {}
    with open("/proc/cpuinfo", encoding="utf-8") as info:
        for line in info:
            if not line.strip():
                break  # the first processor is enough
            name, _, value = line.partition(":")
            fields[name.strip()] = value.strip()
    return {
        "model": fields.get("model name", "unknown"),
        "family_model_stepping": "/".join(
            fields.get(k, "?") for k in ("cpu family", "model", "stepping")
        ),
        "mhz": fields.get("cpu MHz", "?"),
        "cpus": len(os.sched_getaffinity(0)),
        "slowed": os.environ.get(slow_cpu.ENV),
    }


def cpu_line(facts: dict[str, Any]) -> str:
    mhz = facts["mhz"]
    clock = f"{float(mhz):.0f} MHz, " if mhz.replace(".", "", 1).isdigit() else ""
    slowed = f", slowed by `bench.slow_cpu` ({facts['slowed']})" if facts.get("slowed") else ""
    return (
        f"{facts['model']} (family/model/stepping {facts['family_model_stepping']}), "
        f"{clock}{facts['cpus']} CPUs{slowed}"
    )


async def interleaved(
    ctx: Context,
    keys: list[str],
    database: str,
    streams: int,
    repeats: int,
    log: Callable[[str], None],
) -> dict[str, list[dict[str, Any]]]:
    """Each system's case `repeats` times, in rounds: every system once a round (a round is
    what one run measured before), so that every system samples the same stretches of this
    shared machine. The order turns by one each round: no system always runs first."""
    out: dict[str, list[dict[str, Any]]] = {key: [] for key in keys}
    for number in range(1, repeats + 1):
        shift = (number - 1) % len(keys)
        order = keys[shift:] + keys[:shift]
        for position, key in enumerate(order, start=1):
            load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
            speed = machine_speed_ms()
            log(
                f"streaming on {database}: round {number}/{repeats}, {key} "
                f"(load {load}, busy loop {speed:.0f} ms)"
            )
            result = await stream_system(ctx, key, database, streams, round_=number)
            out[key].append(
                {
                    **result,
                    "round": number,
                    "position": position,
                    "load": load,
                    "busy_loop_ms": speed,
                }
            )
    return out


def machine_speed_ms() -> float:
    """The machine's speed just before a case: `bench.slow_cpu`'s busy loop (a million
    additions in Python, median of 3), in ms. The load average says how many wanted a core; this
    says how fast a core was, which a shared host moves by 2x within minutes (benchmarks.md,
    sections 3p-3q): repeats whose busy loops differ were not measured on the same machine."""
    return slow_cpu.busy_loop_s(rounds=3) * 1000


async def stream_system(
    ctx: Context,
    key: str,
    database: str,
    streams: int,
    *,
    profile: Path | None = None,
    round_: int | None = None,
) -> dict[str, Any]:
    model = base_url(ctx.model_port, latency_ms=LATENCY_MS, gap_ms=GAP_MS)
    if key == "direct":
        return await _direct(model, streams)
    async with (
        fresh_target(database, ctx.admin_url, ctx.data_dir, model) as target,
        contextlib.AsyncExitStack() as stopping,
    ):
        port = free_port()
        suffix = "" if round_ is None else f"-r{round_}"
        log = ctx.log(f"streaming-{key}-{database}{suffix}")
        relay: Process | None = None
        if key == "pressloop":
            settings = dict(ctx.pressloop_env)
            if ctx.model_relay:
                relay, relay_port = await _token_relay(
                    ctx, ctx.log(f"token-relay-{database}{suffix}")
                )
                stopping.push_async_callback(relay.stop)  # a no-op once it gave its result
                settings["PRESSLOOP_BASE_URL"] = base_url(
                    relay_port, latency_ms=LATENCY_MS, gap_ms=GAP_MS
                )
            server, kind = await _pressloop_server(
                target, port, log, profile, ctx.serve_processes, settings
            )
        else:
            server, kind = await _peer_server(key, target, port, log)
        limits = httpx.Limits(max_connections=streams + 20, max_keepalive_connections=streams + 20)
        try:
            async with httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{port}", timeout=300, limits=limits
            ) as client:
                await _ready(client, server)
                if kind.startswith("pressloop"):
                    token = (Path(target.data_dir) / "admin-token").read_text().strip()
                    headers = {"Authorization": f"Bearer {token}"}
                    client.headers.update(headers)
                    create, runs, body = "/v1/threads", "/v1/threads/{}/runs", {"mode": "stream"}
                else:
                    headers = {}
                    create, runs, body = "/threads", "/threads/{}/runs", {}
                threads = []
                for _ in range(streams + WARMUP):
                    created = await client.post(create, json={})
                    created.raise_for_status()
                    threads.append(created.json()["id"])
                body = {**body, "message": MESSAGE}
                urls = [f"http://127.0.0.1:{port}" + runs.format(t) for t in threads]
                pid = server.proc.pid
                outcomes, wall, cpu = await _streams(
                    urls, body, headers, streams, lambda: served_cpu_s(pid)
                )
            peak = served_rss_mb(server.proc.pid) if server.proc.returncode is None else None
        finally:
            await server.stop()
        relayed = None if relay is None else await relay.result()
    outcome = _outcome(outcomes, streams, wall, peak, kind, cpu)
    if relayed is not None:
        outcome.update(relay_reads(outcome["stamp_ns"], relayed, streams))
    return outcome


async def _token_relay(ctx: Context, log: Path) -> tuple[Process, int]:
    """The relay in front of the model server (`--model-relay`), started before Pressloop."""
    args = [sys.executable, "-m", "bench.peers.token_relay", "--upstream", str(ctx.model_port)]
    relay = await Process.start(args, name="token relay", log=log)
    try:
        return relay, int(await relay.line("listening", timeout_s=60))
    except BaseException:
        relay.kill()
        raise


def relay_reads(stamps: list[int], relayed: dict[str, Any], streams: int) -> dict[str, Any]:
    """For each first token the client timed, when the relay had read it (ms after the model
    server wrote it), in the same order; and the relay's CPU over its life, per stream."""
    read_at = {int(stamp): int(read) for stamp, read in relayed["reads"]}
    return {
        "relay_read_ms": [(read_at[s] - s) / 1e6 for s in stamps if s in read_at],
        "relay_cpu_ms": 1000 * float(relayed["cpu_s"]) / streams,
    }


async def _direct(model_url: str, streams: int) -> dict[str, Any]:
    """The harness alone (`FLOORS["direct"]`): each stream is the turn's last model call, the
    model server's answer read straight by the bench client, no system between. All streams
    start together, so their first tokens come together: no system can send its first frame
    sooner than this, on this machine, with this client."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": MESSAGE}]
    for n in range(ROUNDS):
        call = {
            "id": f"call_{n}",
            "type": "function",
            "function": {"name": "noop", "arguments": "{}"},
        }
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"call_{n}", "content": "ok"})
    body = {"model": "bench", "messages": messages, "stream": True}
    urls = [f"{model_url}/chat/completions"] * (streams + WARMUP)
    outcomes, wall, _cpu = await _streams(urls, body, {}, streams)
    return _outcome(outcomes, streams, wall, None, "direct")


def _outcome(
    outcomes: list[Any],
    streams: int,
    wall: float,
    peak: float | None,
    kind: str,
    cpu_s: dict[str, float] | None = None,
) -> dict[str, Any]:
    done = [o for o in outcomes if isinstance(o, dict)]
    errors = [repr(o)[:200] for o in outcomes if isinstance(o, BaseException)]
    return {
        "first_ms": [o["first_ms"] for o in done if o["first_ms"] is not None],
        # When each of those first tokens left the model server (its CLOCK_MONOTONIC, ns): how
        # the first tokens were spread in time, beside how long each took.
        "stamp_ns": [o["stamp_ns"] for o in done if o["first_ms"] is not None],
        "finished": sum(1 for o in done if o["finished"]),
        "streams": streams,
        "wall_s": wall,
        "turn_s": [o["turn_s"] for o in done],
        "errors": errors[:3],
        "peak_rss_mb": peak,
        # The server's CPU over the measured streams, per stream (a turn): what each system
        # spends on the same work, and what a change to Pressloop saves, on any CPU.
        "server_cpu_ms": None if cpu_s is None else 1000 * sum(cpu_s.values()) / streams,
        # Of it, Pressloop's stream processes' (0 for a server without any).
        "stream_cpu_ms": None if cpu_s is None else 1000 * cpu_s["stream"] / streams,
        "serving": kind,
    }

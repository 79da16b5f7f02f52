"""API latency: how long a request to `pressloop serve` takes on a kept-alive connection (the way
the admin UI, the CLI and API clients send them), against a new connection each time.

A real `pressloop serve` (SQLite, the scripted model, no WordPress), with one serving process
and with two (`PRESSLOOP_SERVE_PROCESSES=2`: the second gets its socket as a descriptor), beside
the floor of its serving stack: uvicorn and FastAPI answering one JSON route on asyncio's loop,
once on a socket that says TCP and once on one that does not (Nagle's algorithm then stays on,
as it did for `pressloop serve` before its sockets said TCP). Each round sends every case's
requests one after the other from one client (httpx), the servers in turn, so that all of them
sample the same stretches of a shared machine; the table gives each case's median and p99 over
every round.

A server whose answers (headers, then body) go out with Nagle's algorithm on shows about 40 ms
on every kept-alive request but the first: the body waits for the client's delayed ACK.

    python -m bench.api_latency
    python -m bench.api_latency --requests 400 --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench.common import ROOT, code_version, machine_facts, percentile, table
from bench.peers.streaming import cpu, cpu_line, free_port

READY_LIMIT_S = 120.0


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--requests", type=int, default=200, help="kept-alive requests a case a round"
    )
    parser.add_argument("--rounds", type=int, default=3)
    # The floor's process: its port, and whether its socket leaves Nagle's algorithm on.
    parser.add_argument("--serve-floor", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--nagle", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def serve_floor(port: int, nagle: bool) -> None:
    """uvicorn and FastAPI, one route: what any request to `pressloop serve` costs at least.
    With `nagle`, on a socket made without saying TCP (protocol 0), on which asyncio leaves
    Nagle's algorithm on: what `pressloop serve` did before it said IPPROTO_TCP."""
    import uvicorn
    from fastapi import FastAPI

    app = FastAPI()

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    # asyncio's loop, as `pressloop serve`'s (uvloop turns Nagle off on every TCP connection).
    config = uvicorn.Config(app, loop="asyncio", log_level="warning")
    proto = 0 if nagle else socket.IPPROTO_TCP
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, proto)
    sock.bind(("127.0.0.1", port))
    uvicorn.Server(config).run(sockets=[sock])


@dataclass
class Server:
    name: str
    url: str
    process: subprocess.Popen[bytes]
    token: str | None = None  # an admin token: the API's requests; None for the floor

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()


def wait_ready(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + READY_LIMIT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{url} stopped:\n{log.read_text(errors='replace')[-3000:]}")
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"{url} not ready after {READY_LIMIT_S:g} s")


def start_pressloop(name: str, home: Path, processes: int) -> Server:
    script = home / "script.json"
    script.write_text(json.dumps({"cycle": True, "answers": [{"text": "Done."}]}))
    env = {
        **os.environ,
        "PRESSLOOP_DATA_DIR": str(home / "data"),
        "PRESSLOOP_PROVIDER": "scripted",
        "PRESSLOOP_SCRIPT": str(script),
        "PRESSLOOP_SERVE_PROCESSES": str(processes),
    }
    env.pop("PRESSLOOP_DATABASE_URL", None)  # SQLite in the data directory
    port = free_port()
    log = home / "serve.log"
    with log.open("ab") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "pressloop.cli", "serve", "--port", str(port)]
            + ["--no-local-wordpress"],
            env=env,
            cwd=home,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    wait_ready(url, process, log)
    token = (home / "data" / "admin-token").read_text(encoding="utf-8").strip()
    return Server(name, url, process, token)


def start_floor(home: Path, nagle: bool) -> Server:
    port = free_port()
    log = home / f"floor{'-nagle' if nagle else ''}.log"
    command = [sys.executable, "-m", "bench.api_latency", "--serve-floor", str(port)]
    with log.open("ab") as output:
        process = subprocess.Popen(
            command + (["--nagle"] if nagle else []),
            cwd=ROOT,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    wait_ready(url, process, log)
    name = "Floor: uvicorn + FastAPI, one route"
    return Server(
        name + (", Nagle on (a socket that does not say TCP)" if nagle else ""), url, process
    )


# What each case sends: (label, method, path, body); the API's need the admin token.
HEALTH = ("GET /healthz", "GET", "/healthz", None)
API_CASES = [
    ("GET /v1/threads", "GET", "/v1/threads?limit=20", None),
    ("POST /v1/threads", "POST", "/v1/threads", {}),
]


@dataclass
class Samples:
    kept_alive: list[float] = field(default_factory=list)
    fresh: list[float] = field(default_factory=list)


def timed(client: httpx.Client, method: str, path: str, body: object) -> float:
    """One request's time, its whole answer read (ms)."""
    started = time.perf_counter()
    answer = client.request(method, path, json=body)
    elapsed = (time.perf_counter() - started) * 1e3
    if answer.status_code >= 400:
        raise SystemExit(f"{answer.request.method} {answer.request.url}: {answer.status_code}")
    return elapsed


def measure_round(server: Server, requests: int, results: dict[tuple[str, str], Samples]) -> None:
    headers = {"Authorization": f"Bearer {server.token}"} if server.token else {}
    cases = [HEALTH, *API_CASES] if server.token else [HEALTH]
    for label, method, path, body in cases:
        samples = results.setdefault((server.name, label), Samples())
        with httpx.Client(base_url=server.url, headers=headers, timeout=30) as client:
            client.get("/healthz")  # the connection made: every request below reuses it
            for _ in range(requests):
                samples.kept_alive.append(timed(client, method, path, body))
        fresh = httpx.Limits(max_keepalive_connections=0)
        with httpx.Client(base_url=server.url, headers=headers, timeout=30, limits=fresh) as one:
            for _ in range(max(1, requests // 4)):
                samples.fresh.append(timed(one, method, path, body))


def main(argv: Sequence[str]) -> None:
    args = parse(argv)
    if args.serve_floor:
        serve_floor(args.serve_floor, args.nagle)
        return
    load = os.getloadavg()
    code = code_version()
    results: dict[tuple[str, str], Samples] = {}
    with tempfile.TemporaryDirectory(prefix="pressloop-api-latency-") as folder:
        tmp = Path(folder)
        servers: list[Server] = []
        try:
            for name, processes in (("Pressloop, 1 process", 1), ("Pressloop, 2 processes", 2)):
                home = tmp / f"serve{processes}"
                home.mkdir()
                servers.append(start_pressloop(name, home, processes))
            servers += [start_floor(tmp, nagle=False), start_floor(tmp, nagle=True)]
            for n in range(args.rounds):
                print(f"round {n + 1}/{args.rounds}", file=sys.stderr)
                for server in servers:
                    measure_round(server, args.requests, results)
        finally:
            for server in servers:
                server.stop()
    rows = [
        [
            server,
            label,
            str(len(samples.kept_alive)),
            f"{percentile(samples.kept_alive, 50):.2f}",
            f"{percentile(samples.kept_alive, 99):.2f}",
            str(len(samples.fresh)),
            f"{percentile(samples.fresh, 50):.2f}",
            f"{percentile(samples.fresh, 99):.2f}",
        ]
        for (server, label), samples in results.items()
    ]
    print("\n".join(f"- {line}" for line in machine_facts(load, code)))
    print(f"- CPU: {cpu_line(cpu())}; client: httpx {httpx.__version__}, {args.rounds} rounds")
    print()
    print(
        table(
            [
                "server",
                "request",
                "kept-alive requests",
                "median (ms)",
                "p99 (ms)",
                "new-connection requests",
                "median (ms)",
                "p99 (ms)",
            ],
            rows,
        )
    )


if __name__ == "__main__":
    main(sys.argv[1:])

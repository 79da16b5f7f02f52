"""`PRESSLOOP_SERVE_PROCESSES=2`: two real `pressloop serve` processes on one port, on both
databases. The connections are spread over both, each runs the turns posted to it, and stopping
the first stops the other."""

from __future__ import annotations

import asyncio
import json
import re
import socket
from pathlib import Path

import httpx
import pytest

from pressloop.serve_processes import reuse_port_sockets
from tests.support.serve import Serve, serve_env

TURNS = 16  # each on a new connection: all on one of two processes by chance is 1 in 2**15


def alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


async def test_two_processes_share_the_port_and_the_turns(
    database_url: str, database: object, tmp_path: Path
) -> None:
    script = tmp_path / "answers.json"
    script.write_text(json.dumps({"cycle": True, "answers": [{"text": "Done."}]}))
    env = serve_env(
        tmp_path / "data",
        script,
        PRESSLOOP_DATABASE_URL=database_url,
        PRESSLOOP_SERVE_PROCESSES="2",
    )
    async with Serve(tmp_path, env, "--no-local-wordpress") as server:
        assert server.process is not None
        assert "2 serving processes share the port" in server.output()
        # No keep-alive: every request is a new connection, which the kernel gives either.
        fresh = httpx.Limits(max_keepalive_connections=0)
        async with server.client(timeout=60, limits=fresh) as client:

            async def turn(i: int) -> str:
                thread = (await client.post("/v1/threads", json={})).json()["id"]
                answer = await client.post(
                    f"/v1/threads/{thread}/runs", json={"message": f"hello {i}", "mode": "wait"}
                )
                assert answer.status_code == 200, server.output()[-3000:]
                run = answer.json()["run"]
                assert run["status"] == "succeeded"
                events = (await client.get(f"/v1/runs/{run['id']}/events")).json()
                assert events[0]["type"] == "run.started"
                return str(events[0]["data"]["worker"])

            owners = set(await asyncio.gather(*(turn(i) for i in range(TURNS))))
        started = re.findall(r"Pressloop serving process (\d+) on the shared port", server.output())
        assert len(started) == 1, server.output()
        other = int(started[0])
        host = socket.gethostname()
        assert owners == {f"{host}:{server.process.pid}", f"{host}:{other}"}
    assert server.process.returncode == 0
    assert not alive(other)  # stopped with the first, and reaped by it


def test_a_port_in_use_is_refused_to_a_second_server() -> None:
    # One process binds without SO_REUSEPORT: a second server started by mistake on the same
    # port fails, rather than quietly taking half of the first one's connections.
    [first] = reuse_port_sockets("127.0.0.1", 0, 1)
    try:
        port = first.getsockname()[1]
        for count in (1, 2):
            with pytest.raises(OSError):
                reuse_port_sockets("127.0.0.1", port, count)
    finally:
        first.close()
    shared = reuse_port_sockets("127.0.0.1", 0, 2)
    try:
        assert len({s.getsockname()[1] for s in shared}) == 1
    finally:
        for sock in shared:
            sock.close()

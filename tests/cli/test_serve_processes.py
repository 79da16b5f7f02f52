"""`PRESSLOOP_SERVE_PROCESSES=2`: two real `pressloop serve` processes on one port, on both
databases. The connections are spread over both, each runs the turns posted to it, and stopping
the first stops the other."""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
from pathlib import Path

import httpx
import pytest

from pressloop.cli_serve import serving_loop
from pressloop.config import Settings
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


@pytest.mark.parametrize("processes", ["1", "2"])
def test_a_server_started_on_a_port_in_use_says_so_before_it_starts_anything(
    tmp_path: Path, processes: str
) -> None:
    """Said as the address's problem, not as the database's (any other OSError at the start is
    taken for one), and before a local WordPress or a stream process is started for nothing."""
    [taken] = reuse_port_sockets("127.0.0.1", 0, 1)
    try:
        env = serve_env(tmp_path / "data", PRESSLOOP_SERVE_PROCESSES=processes)
        server = Serve(tmp_path, env, port=taken.getsockname()[1])  # the local WordPress asked
        process = server.launch()
        assert process.wait(timeout=60) == 1, server.output()
    finally:
        taken.close()
    output = server.output()
    assert f"cannot listen on 127.0.0.1:{server.port}: Address already in use" in output
    assert "database" not in output and "WordPress" not in output, output


@pytest.mark.parametrize("processes", ["1", "2"])
async def test_a_server_with_no_model_provider_serves_and_each_turn_says_what_to_set(
    tmp_path: Path, processes: str
) -> None:
    """Deciding whether to start stream processes asks which provider is configured; with none
    `pressloop serve` with two processes stopped at start ("No model provider is configured")
    while one served and let each turn say it. Both serve now, with no stream process."""
    env = serve_env(tmp_path / "data", PRESSLOOP_SERVE_PROCESSES=processes)
    del env["PRESSLOOP_PROVIDER"]  # and no key: serve_env's environment is isolated
    async with Serve(tmp_path, env, "--no-local-wordpress") as server:
        auth = {"Authorization": f"Bearer {server.admin_token}"}
        async with httpx.AsyncClient(base_url=server.url, timeout=30, trust_env=False) as client:
            thread = (await client.post("/v1/threads", json={}, headers=auth)).json()["id"]
            answer = await client.post(
                f"/v1/threads/{thread}/runs",
                json={"message": "hello", "mode": "wait"},
                headers=auth,
            )
        assert server.stream_processes() == []
    run = answer.json()["run"]
    assert run["status"] == "failed", run
    assert run["error"]["cls"] == "ProviderNotConfigured"
    assert run["error"]["message"].startswith("No model provider is configured. Set")


class _Accepted(asyncio.Protocol):
    """Notes, for each connection the served socket accepts, whether Nagle's algorithm is off."""

    def __init__(self, index: int, seen: list[tuple[int, int]]) -> None:
        self.index = index
        self.seen = seen

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        sock = transport.get_extra_info("socket")
        self.seen.append((self.index, sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)))
        transport.close()


@pytest.mark.parametrize("event_loop", ["lanes", "uvloop"])
@pytest.mark.parametrize("count", [1, 2])
def test_every_served_connection_sends_small_writes_at_once(event_loop: str, count: int) -> None:
    # An answer goes out in two writes (the headers, then the body). With Nagle's algorithm on,
    # the body waited for the client's delayed ACK of the headers: about 40 ms on every request
    # after the first on a kept-alive connection (the admin UI, the CLI, an API client). The
    # sockets `pressloop serve` listens on, the first process's and those the others rebuild
    # from a descriptor (`serve --fd`), served by the loop `serve` runs, turn it off.
    sockets = reuse_port_sockets("127.0.0.1", 0, count)
    served = sockets[:1] + [socket.socket(fileno=os.dup(s.fileno())) for s in sockets[1:]]
    loop = serving_loop(Settings(event_loop=event_loop))
    seen: list[tuple[int, int]] = []

    async def connect_until_every_socket_accepted() -> None:
        servers = [
            await loop.create_server(lambda i=i: _Accepted(i, seen), sock=sock)
            for i, sock in enumerate(served)
        ]
        try:
            port = sockets[0].getsockname()[1]
            for _ in range(TURNS):
                _reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.close()
                await asyncio.sleep(0.01)
                if {index for index, _ in seen} == set(range(count)):
                    break
        finally:
            for server in servers:
                server.close()

    try:
        loop.run_until_complete(connect_until_every_socket_accepted())
    finally:
        loop.close()
        for sock in sockets[1:]:
            sock.close()
    assert {index for index, _ in seen} == set(range(count)), seen
    assert all(nodelay for _, nodelay in seen), seen

"""A relay in front of the model server that does nothing but pass bytes: when could a process
with no other work have read each first token?

Pressloop's first frame under 200 streams waits, on a slow CPU, for its serving process to get
a core back (docs/benchmarks.md, sections 3q and 3x). Whether a process that did only the token's
work would wait as long is the floor of a design that moves that work out of the busy
processes. Put between Pressloop and the model server (`python -m bench.peers --model-relay`),
this relay carries every byte of every model call, each way, and notes for each first-token
stamp (`[t<ns>]`, the model server's CLOCK_MONOTONIC) when it read it: the time from the model
server's write to a mostly idle reader's read, under the same load, in the same run. It parses
nothing and stores nothing else, so what it measures is the wait for a core of a process whose
work is one read and one write a chunk.

    python -m bench.peers.token_relay --upstream 8123 --port 0    # prints "listening <port>"

A line "result" on its standard input prints "RESULT {json}" (the reads and its own CPU) and
ends it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from typing import cast

import uvloop

from bench.peers.model_server import STAMP
from bench.peers.server_usage import cpu_s


class _Upstream(asyncio.Protocol):
    """The model server's side of one relayed connection: its bytes go down as they come."""

    def __init__(self, relay: TokenRelay, down: asyncio.Transport) -> None:
        self.relay = relay
        self.down = down

    def data_received(self, data: bytes) -> None:
        if b"[t" in data:  # a first token, seldom: the search costs nothing on the others
            now = time.monotonic_ns()
            for stamp in STAMP.finditer(data.decode("utf-8", "replace")):
                self.relay.reads.setdefault(int(stamp.group(1)), now)
        self.down.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.down.close()


class _Downstream(asyncio.Protocol):
    """The client's side (Pressloop's model client): connects upstream, holds what it sends until
    then, and relays the rest as it comes."""

    def __init__(self, relay: TokenRelay) -> None:
        self.relay = relay
        self.up: asyncio.Transport | None = None
        self.held: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport instances, but have its methods.
        self.transport = cast(asyncio.Transport, transport)
        asyncio.get_running_loop().create_task(self._connect())

    async def _connect(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            up, _ = await loop.create_connection(
                lambda: _Upstream(self.relay, self.transport), "127.0.0.1", self.relay.upstream
            )
        except OSError:
            self.transport.close()
            return
        if self.transport.is_closing():  # the client went away while this connected
            up.close()
            return
        self.up = cast(asyncio.Transport, up)
        for data in self.held:
            self.up.write(data)
        self.held.clear()

    def data_received(self, data: bytes) -> None:
        if self.up is None:
            self.held.append(data)
        else:
            self.up.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.up is not None:
            self.up.close()


class TokenRelay:
    """Relays 127.0.0.1:`port` to the model server on `upstream`, noting when each first-token
    stamp was read (`reads`: stamp ns -> read ns, both CLOCK_MONOTONIC)."""

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.reads: dict[int, int] = {}
        self._server: asyncio.Server | None = None

    async def start(self, port: int = 0) -> int:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _Downstream(self), "127.0.0.1", port)
        return int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()


async def _serve(upstream: int, port: int) -> None:
    relay = TokenRelay(upstream)
    print(f"listening {await relay.start(port)}", flush=True)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while line := await reader.readline():
        if line.strip() == b"result":
            reads = sorted(relay.reads.items())
            print("RESULT " + json.dumps({"reads": reads, "cpu_s": cpu_s(os.getpid())}), flush=True)
            break
    await relay.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--upstream", type=int, required=True, help="the model server's port")
    parser.add_argument("--port", type=int, default=0)
    options = parser.parse_args(argv)
    # uvloop, as `pressloop serve` may run: the relay's own cost a chunk is as small as it gets.
    uvloop.run(_serve(options.upstream, options.port))


if __name__ == "__main__":
    main()

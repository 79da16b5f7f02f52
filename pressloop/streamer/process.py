"""`python -m pressloop.streamer`: the stream process, started by `pressloop serve`
(`PRESSLOOP_STREAM_PROCESS=1`) with two inherited sockets: the unix socket its serving processes
hand streams over on, and the loopback socket their relayed model calls come to.

It runs on uvloop, alone: its work is a token's (read a chunk, write a frame), and it must be idle
when the next token comes. It ends on SIGTERM, or when the process that started it is gone.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import socket

import uvloop

from pressloop.streamer.relay import Relay
from pressloop.streamer.streams import Streams

logger = logging.getLogger(__name__)

SECRET_ENV = "PRESSLOOP_STREAMER_SECRET"
PARENT_CHECK_S = 1.0


async def accept_streams(listener: socket.socket, streams: Streams) -> None:
    loop = asyncio.get_running_loop()
    listener.setblocking(False)
    handlers: set[asyncio.Task[None]] = set()
    while True:
        connection, _ = await loop.sock_accept(listener)
        handler = asyncio.create_task(streams.serve_control(connection))
        handlers.add(handler)
        handler.add_done_callback(handlers.discard)


async def watch_parent(stop: asyncio.Event, parent: int) -> None:
    while os.getppid() == parent and not stop.is_set():  # noqa: ASYNC110 - the parent is polled
        await asyncio.sleep(PARENT_CHECK_S)
    if not stop.is_set():
        logger.warning("the process that started the stream process is gone: stopping")
    stop.set()


async def serve(
    control_fd: int, relay_fd: int, secret: str, timeout_s: float, ready_fd: int = -1
) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    streams = Streams()
    relay = Relay(streams, secret, timeout_s)
    server = await loop.create_server(relay.protocol, sock=socket.socket(fileno=relay_fd))
    listener = socket.socket(fileno=control_fd)
    tasks = [
        asyncio.create_task(accept_streams(listener, streams)),
        asyncio.create_task(watch_parent(stop, os.getppid())),
    ]
    if ready_fd >= 0:  # serving: `pressloop serve` may now serve too (`launch.py`)
        os.write(ready_fd, b"1")
        os.close(ready_fd)
    try:
        await stop.wait()
    finally:
        server.close()
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        listener.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pressloop.streamer")
    parser.add_argument("--control-fd", type=int, required=True)
    parser.add_argument("--relay-fd", type=int, required=True)
    parser.add_argument("--timeout", type=float, required=True, help="a model call's, seconds")
    parser.add_argument("--ready-fd", type=int, default=-1, help="written to once serving")
    args = parser.parse_args(argv)
    secret = os.environ.pop(SECRET_ENV, "")
    if not secret:
        parser.error(f"{SECRET_ENV} is not set")
    logging.basicConfig(level=logging.WARNING)
    uvloop.run(serve(args.control_fd, args.relay_fd, secret, args.timeout, args.ready_fd))
    return 0

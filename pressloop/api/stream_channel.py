"""The line protocol between a serving process and the stream process (`pressloop.streamer`).

One unix connection a handed-over stream. Its first message carries the client's connection
(SCM_RIGHTS) and says which run it streams; the stream process answers `ok` once it owns it. Then
the serving process sends the run's committed events, in order, and `end` when the stream is
over; the stream process answers `done` when everything is written (the serving process then
lets the server close the response), or `gone` at any time (the client went away, or the frames
could not be placed: the serving process ends the stream).

Each message is one JSON object on one line.
"""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

from pressloop.contracts import Event

# The first message (the open, with the connection) is read whole in one receive.
MAX_OPEN_BYTES = 4096


def open_message(key: str, run_id: str, ping_s: float) -> bytes:
    return _line({"open": key, "run": run_id, "ping": ping_s})


EVENT_PREFIX = b'{"event":'


def event_message(event: Event) -> bytes:
    return EVENT_PREFIX + event.model_dump_json().encode() + b"}\n"


def event_json(line: bytes) -> bytes | None:
    """The event an `event_message` carries, as the serving process wrote it (None for any other
    message): the stream process parses it once, straight from its JSON, and writes that JSON
    itself into the event's frame rather than dumping it again."""
    if line.startswith(EVENT_PREFIX) and line.endswith(b"}\n"):
        return line[len(EVENT_PREFIX) : -2]
    return None


END = b'{"end":true}\n'
OK = b'{"ok":true}\n'
DONE = b'{"done":true}\n'


def gone_message(reason: str) -> bytes:
    return _line({"gone": reason})


def read_message(line: bytes) -> dict[str, Any]:
    """One message; a line that is not one raises ValueError."""
    message = json.loads(line)
    if not isinstance(message, dict):
        raise ValueError(f"not a message: {line[:200]!r}")
    return message


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


async def wait_readable(sock: socket.socket) -> None:
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()
    fd = sock.fileno()

    def readable() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(fd, readable)
    try:
        await ready
    finally:
        loop.remove_reader(fd)


async def receive_open(sock: socket.socket) -> tuple[dict[str, Any], int]:
    """The first message of a connection to the stream process and the connection it carries.
    The sender waits for the answer before it sends more, so it is all there is to read."""
    data = b""
    fds: list[int] = []
    while not data.endswith(b"\n"):
        try:
            chunk, got, _flags, _address = socket.recv_fds(sock, MAX_OPEN_BYTES, 1)
        except BlockingIOError:
            await wait_readable(sock)
            continue
        fds += got
        if not chunk or len(data) + len(chunk) > MAX_OPEN_BYTES:
            for fd in fds:
                socket.close(fd)
            raise ValueError("the open message was cut short")
        data += chunk
    if len(fds) != 1:
        for fd in fds:
            socket.close(fd)
        raise ValueError("an open message carries one connection")
    try:
        return read_message(data), fds[0]
    except ValueError:
        socket.close(fds[0])
        raise

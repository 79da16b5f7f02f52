"""Writing a handed-over client connection: HTTP chunks of a response whose headers were sent.

The connection stays the serving process's: its server reads the socket (a request that follows
on the kept-alive connection, or its close), and writes the response's last chunk once the stream
process says it is done. So this side only writes, never reads, never changes the socket's flags
(they are shared with the other process) and, at the end, closes only its own descriptor.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable

# A client that reads too slowly to take this much is gone for this stream.
MAX_BUFFERED_BYTES = 4 * 1024 * 1024


class ClientConnection:
    def __init__(self, fd: int, on_broken: Callable[[str], None]) -> None:
        self._sock = socket.socket(fileno=fd)
        self._loop = asyncio.get_running_loop()
        self._buffer = bytearray()
        self._drained = asyncio.Event()
        self._drained.set()
        self._on_broken = on_broken
        self.broken: str | None = None
        self.last_write = self._loop.time()

    def write_chunk(self, data: bytes) -> None:
        """`data` as one HTTP chunk, written now or as soon as the socket takes it."""
        if self.broken is not None or not data:
            return
        self.last_write = self._loop.time()
        chunk = b"%x\r\n%s\r\n" % (len(data), data)
        if self._buffer:
            self._buffer += chunk
            if len(self._buffer) > MAX_BUFFERED_BYTES:
                self._break("the client reads too slowly")
            return
        try:
            written = self._sock.send(chunk)
        except BlockingIOError:
            written = 0
        except OSError as exc:
            self._break(f"the client's connection failed: {exc}")
            return
        if written < len(chunk):
            self._buffer += chunk[written:]
            self._drained.clear()
            self._loop.add_writer(self._sock.fileno(), self._flush)

    def _flush(self) -> None:
        try:
            written = self._sock.send(self._buffer)
        except BlockingIOError:
            return
        except OSError as exc:
            self._break(f"the client's connection failed: {exc}")
            return
        del self._buffer[:written]
        if not self._buffer:
            self._loop.remove_writer(self._sock.fileno())
            self._drained.set()

    async def drained(self, timeout_s: float) -> bool:
        """Wait until everything written is on the wire; False if it is not within `timeout_s`."""
        try:
            async with asyncio.timeout(timeout_s):
                await self._drained.wait()
        except TimeoutError:
            return False
        return self.broken is None

    def cut(self) -> None:
        """End the connection itself (the frames went wrong): the client reconnects."""
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._break("cut")

    def close(self) -> None:
        """Let go of this process's descriptor (the connection lives on in the server's)."""
        if self._buffer:
            self._loop.remove_writer(self._sock.fileno())
            self._buffer.clear()
        self._drained.set()
        self._sock.close()

    def _break(self, reason: str) -> None:
        if self.broken is not None:
            return
        self.broken = reason
        if self._buffer:
            self._loop.remove_writer(self._sock.fileno())
            self._buffer.clear()
        self._drained.set()
        self._on_broken(reason)

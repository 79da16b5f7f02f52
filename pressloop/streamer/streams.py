"""The handed-over streams: each one's control connection from its serving process, its client
connection, its position, and its frames.
"""

from __future__ import annotations

import asyncio
import logging
import socket

from pressloop.api.frames import frame
from pressloop.api.stream_channel import (
    DONE,
    OK,
    event_json,
    gone_message,
    read_message,
    receive_open,
)
from pressloop.contracts import Event
from pressloop.streamer.connection import ClientConnection
from pressloop.streamer.position import Diverged, HandedOverPosition

logger = logging.getLogger(__name__)

# How long the end of a stream waits for its last frames to reach a slow client.
END_DRAIN_S = 10.0
PING_BYTES = b": ping\r\n\r\n"


class HandedOverStream:
    """One client's stream of one run. A run's model call may come before its stream (the run
    starts when it is submitted, the stream is handed over a moment later): the call's text is
    then kept here until the stream opens and the events before the call arrive."""

    def __init__(self) -> None:
        self.client: ClientConnection | None = None
        self.position = HandedOverPosition(run_id="")
        self.ping_s = 0.0

    def open(self, run_id: str, client: ClientConnection, ping_s: float) -> None:
        self.position.run_id = run_id
        self.client = client
        self.ping_s = ping_s

    def write(self, events: list[Event], whole: tuple[Event, str] | None = None) -> None:
        """`whole`: a committed event and its JSON, for its frame if it goes out as it is."""
        # Nothing goes out before the events before it, and those come after the open.
        # The frames of one write go as one HTTP chunk: one send for a model read's parts.
        if self.client is None or not events:
            return
        frames = (
            frame(event, whole[1] if whole is not None and event is whole[0] else None)
            for event in events
        )
        self.client.write_chunk(b"".join(f.encode() for f in frames))

    def committed(self, json: bytes) -> None:
        """A committed event, as the serving process sent it (`stream_channel.event_message`)."""
        event = Event.model_validate_json(json)
        try:
            self.write(self.position.committed(event), whole=(event, json.decode()))
        except Diverged:
            logger.exception("a handed-over stream of run %s is cut", self.position.run_id)
            if self.client is not None:
                self.client.cut()

    def call_started(self, base: int, offset: int) -> None:
        self.write(self.position.call_started(base, offset))

    def read(self, texts: list[str]) -> None:
        """The parts of text read from the model at once (one read of its answer)."""
        events: list[Event] = []
        for text in texts:
            events += self.position.read(text)
        self.write(events)

    async def ping(self) -> None:
        """A comment whenever nothing was written for a ping interval (proxies keep it open)."""
        if self.ping_s <= 0:
            return
        loop = asyncio.get_running_loop()
        client = self.client
        while client is not None and client.broken is None:
            idle = loop.time() - client.last_write
            if idle >= self.ping_s:
                client.write_chunk(PING_BYTES)
                idle = 0.0
            await asyncio.sleep(self.ping_s - idle)


class Streams:
    """Every stream this process writes, by the key its serving process gave it."""

    def __init__(self) -> None:
        self._streams: dict[str, HandedOverStream] = {}

    def get(self, key: str) -> HandedOverStream | None:
        return self._streams.get(key)

    def for_call(self, key: str) -> HandedOverStream:
        """The stream `key` a relayed call's text goes to, opened or still to come."""
        stream = self._streams.get(key)
        if stream is None:
            stream = self._streams[key] = HandedOverStream()
        return stream

    def call_ended(self, key: str) -> None:
        """A relayed call of `key` ended: a stream that never opened is forgotten (its run's
        frames come with the commits if it opens later)."""
        stream = self._streams.get(key)
        if stream is not None and stream.client is None:
            del self._streams[key]

    async def serve_control(self, sock: socket.socket) -> None:
        """One serving process's connection for one stream, until the stream ends."""
        sock.setblocking(False)
        try:
            message, fd = await receive_open(sock)
        except (ValueError, OSError):
            logger.warning("a stream's open message was refused", exc_info=True)
            sock.close()
            return
        reader, writer = await asyncio.open_unix_connection(sock=sock)
        key, run_id = str(message.get("open", "")), str(message.get("run", ""))

        def broken(reason: str) -> None:
            if not writer.is_closing():
                writer.write(gone_message(reason))

        client = ClientConnection(fd, broken)
        stream = self._streams.get(key) or HandedOverStream()
        if not key or stream.client is not None:
            client.close()
            writer.write(gone_message("a stream needs a key of its own"))
            writer.close()
            return
        stream.open(run_id, client, float(message["ping"]))
        self._streams[key] = stream
        pinging = asyncio.create_task(stream.ping())
        try:
            writer.write(OK)
            await self._follow(reader, writer, stream)
        except (OSError, ValueError):
            # The serving process is gone or spoke nonsense: the stream ends; its server
            # closes the response (or the connection, with the process).
            logger.warning("a handed-over stream of run %s lost its channel", run_id, exc_info=True)
        finally:
            pinging.cancel()
            del self._streams[key]
            client.close()
            writer.close()

    async def _follow(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, stream: HandedOverStream
    ) -> None:
        while line := await reader.readline():
            json = event_json(line)
            if json is not None:
                stream.committed(json)
                continue
            message = read_message(line)
            if message.get("end"):
                client = stream.client
                assert client is not None
                if await client.drained(END_DRAIN_S):
                    writer.write(DONE)
                else:
                    writer.write(gone_message(client.broken or "the client reads nothing"))
                await writer.drain()
                return

"""A handed-over stream's committed events: each reaches the person in the frame the serving
process would have written for it (the stream process writes the serving process's own JSON
of an event that goes out whole), and what is left of a delta after the parts already sent is
framed anew."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from pressloop.api.frames import frame
from pressloop.api.stream_channel import END, event_json, event_message
from pressloop.contracts import Event, EventType
from pressloop.streamer.connection import ClientConnection
from pressloop.streamer.streams import HandedOverStream

RUN, THREAD = "run-1", "thread-1"


def _event(seq: int, type_: EventType, data: dict[str, object]) -> Event:
    return Event(
        run_id=RUN,
        thread_id=THREAD,
        seq=seq,
        type=type_,
        ts=datetime(2026, 12, 7, 13, 0, seq, 123456, tzinfo=UTC),
        data=data,
    )


@pytest.fixture
async def opened() -> AsyncIterator[tuple[HandedOverStream, socket.socket]]:
    ours, theirs = socket.socketpair()
    theirs.settimeout(5)
    stream = HandedOverStream()
    stream.open(RUN, ClientConnection(ours.detach(), lambda _reason: None), ping_s=0)
    yield stream, theirs
    assert stream.client is not None
    stream.client.close()
    theirs.close()


def _chunk(sock: socket.socket) -> bytes:
    """One HTTP chunk the client received (its frames)."""
    received = sock.recv(65536)
    size, rest = received.split(b"\r\n", 1)
    assert len(rest) == int(size, 16) + 2, "one chunk, all of it"
    return rest[:-2]


def _committed(stream: HandedOverStream, event: Event) -> None:
    """`event` as the serving process sends it, as the stream process reads it."""
    sent = event_json(event_message(event))
    assert sent is not None
    stream.committed(sent)


async def test_an_event_that_goes_out_whole_is_the_serving_process_s_frame(
    opened: tuple[HandedOverStream, socket.socket],
) -> None:
    stream, client = opened
    started = _event(
        1, EventType.RUN_STARTED, {"attempt": 1, "note": 'ünïcode \u2028 and "quotes"'}
    )
    _committed(stream, started)
    assert _chunk(client) == frame(started).encode()


async def test_the_rest_of_a_delta_after_the_parts_sent_is_framed_anew(
    opened: tuple[HandedOverStream, socket.socket],
) -> None:
    stream, client = opened
    _committed(stream, _event(1, EventType.RUN_STARTED, {}))
    _chunk(client)
    stream.call_started(1, 0)
    stream.read(["Hel"])
    assert json.loads(_chunk(client).split(b"data: ", 1)[1].split(b"\r\n")[0])["data"] == {
        "delta": "Hel",
        "after": 1,
        "part": 1,
    }
    # The commit merged the part sent with one the stream process did not read (a retry's).
    merged = _event(2, EventType.MESSAGE, {"delta": "Hello", "parts": [3, 2]})
    _committed(stream, merged)
    [data] = [
        line[len(b"data: ") :] for line in _chunk(client).split(b"\r\n") if line.startswith(b"data")
    ]
    assert json.loads(data)["data"] == {"delta": "lo", "after_part": 1}


def test_only_an_event_message_carries_an_event() -> None:
    assert event_json(END) is None
    assert event_json(b'{"gone":"the client left"}\n') is None


async def test_an_event_the_stream_process_cannot_read_is_refused(
    opened: tuple[HandedOverStream, socket.socket],
) -> None:
    """A ValueError: the stream's channel is given up (`Streams.serve_control`), nothing sent."""
    stream, _client = opened
    with pytest.raises(ValueError):
        stream.committed(b'{"seq": "not a number"}')

"""The stream process's relay between the official `openai` SDK and a server speaking OpenAI's
real wire protocol: the answer passes unchanged, its text is cut on the way into the parts the
engine emits, and nobody without the secret gets through."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass

import openai
import pytest

from pressloop.providers.openai_chat import UPSTREAM_HEADER
from pressloop.streamer.connection import ClientConnection
from pressloop.streamer.relay import AnswerReader, Relay, _Call, _ProviderSide, _ServingSide
from pressloop.streamer.streams import HandedOverStream, Streams
from tests.support.processes import free_port
from tests.wire.fixtures import openai_server, openai_server_session  # noqa: F401
from tests.wire.openai_server import FakeOpenAIServer
from tests.wire.scripted_server import Reply

SECRET = "s3cret-for-the-test"
PIECES = ("Hel", "lo, ", "wor", "ld.")


@pytest.fixture
async def relay() -> AsyncIterator[tuple[str, Streams]]:
    streams = Streams()
    relay = Relay(streams, SECRET, timeout_s=5)
    server = await asyncio.get_running_loop().create_server(relay.protocol, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/relay", streams
    finally:
        server.close()


def client(base_url: str, upstream: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        api_key="sk-relayed",
        base_url=base_url,
        max_retries=0,
        default_headers={UPSTREAM_HEADER: upstream},
    )


async def test_a_relayed_answer_arrives_whole_and_its_text_is_read_on_the_way(
    relay: tuple[str, Streams],
    openai_server: FakeOpenAIServer,  # noqa: F811
) -> None:
    root, streams = relay
    openai_server.push(Reply(text="".join(PIECES), deltas=PIECES), Reply(text="Again."))
    sdk = client(f"{root}/{SECRET}/key1/3/0", openai_server.base_url)
    chunks = await sdk.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    texts = [c.choices[0].delta.content async for c in chunks if c.choices]
    assert "".join(t or "" for t in texts) == "".join(PIECES)
    # Its text was kept for the stream `key1` while the call lasted (a hand-over may follow the
    # call's start); no stream opened before the call ended: nothing is kept.
    assert streams.get("key1") is None
    # The same kept-alive connection carries the next call; the provider saw the SDK's own.
    again = await sdk.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}]
    )
    assert again.choices[0].message.content == "Again."
    first = openai_server.requests[0]
    assert first.path == "/v1/chat/completions"
    assert first.headers["authorization"] == "Bearer sk-relayed"
    assert first.headers["host"] == openai_server.base_url.split("//")[1].split("/")[0]
    assert not any(name.lower().startswith("x-pressloop") for name in first.headers)
    await sdk.close()


async def test_the_parts_are_those_the_adapter_cuts(
    relay: tuple[str, Streams],
    openai_server: FakeOpenAIServer,  # noqa: F811
) -> None:
    root, streams = relay
    stream = streams.for_call("key2")  # the stream the call's text goes to
    openai_server.push(Reply(text="".join(PIECES), deltas=PIECES))
    sdk = client(f"{root}/{SECRET}/key2/3/0", openai_server.base_url)
    chunks = await sdk.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    async for _ in chunks:
        pass
    call = stream.position.call
    assert call is not None and (call.base, call.offset) == (3, 0)
    assert call.texts == list(PIECES)
    await sdk.close()


async def test_without_the_secret_nothing_passes(
    relay: tuple[str, Streams],
    openai_server: FakeOpenAIServer,  # noqa: F811
) -> None:
    root, _ = relay
    sdk = client(f"{root}/not-the-secret/key/0/0", openai_server.base_url)
    with pytest.raises(openai.NotFoundError):
        await sdk.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    assert openai_server.requests == []
    await sdk.close()


async def test_a_provider_out_of_reach_is_a_bad_gateway(relay: tuple[str, Streams]) -> None:
    root, _ = relay
    sdk = client(f"{root}/{SECRET}/key/0/0", f"http://127.0.0.1:{free_port()}/v1")
    with pytest.raises(openai.APIStatusError) as raised:
        await sdk.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    assert raised.value.status_code == 502  # retryable, as the provider's own failure is
    await sdk.close()


def _sse_chunk(text: str) -> bytes:
    delta = {"index": 0, "delta": {"content": text}, "finish_reason": None}
    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    return b"data: " + json.dumps({**chunk, "choices": [delta]}).encode() + b"\n\n"


def _fields(frame: str) -> list[tuple[str, str]]:
    return [(line.split(": ", 1)[0], line.split(": ", 1)[1]) for line in frame.splitlines()]


async def test_the_parts_of_one_read_go_to_the_client_as_one_chunk() -> None:
    """One read of the answer holding several parts is one write to the person (one HTTP chunk
    of several frames), not one a part."""
    ours, theirs = socket.socketpair()
    stream = HandedOverStream()
    stream.open("run-1", ClientConnection(ours.detach(), lambda _reason: None), ping_s=0)
    stream.call_started(0, 0)
    reader = AnswerReader(stream)
    reader.feed(b"".join(_sse_chunk(piece) for piece in PIECES))
    theirs.setblocking(False)
    with pytest.raises(BlockingIOError):
        theirs.recv(65536)  # kept until the read is over
    reader.send()
    theirs.settimeout(5)
    received = theirs.recv(65536)
    size, rest = received.split(b"\r\n", 1)
    assert len(rest) == int(size, 16) + 2  # one chunk, all of it
    frames = [dict(_fields(f)) for f in re.split(r"\r?\n\r?\n", rest[:-2].decode()) if f]
    assert [json.loads(f["data"])["data"]["delta"] for f in frames] == list(PIECES)
    assert [f["id"] for f in frames] == ["0.1", "0.2", "0.3", "0.4"]
    stream.client.close()  # type: ignore[union-attr]
    theirs.close()


def _http_chunk(body: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(body), body)


ANSWER_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
)


@dataclass
class RelayedCall:
    """A relayed call's two ends in the stream process, the provider's reads fed by hand: what
    the person's socket (`person`) and the serving process's (`serving`) receive of them."""

    provider: _ProviderSide
    person: socket.socket
    serving: socket.socket


@contextlib.asynccontextmanager
async def relayed_call() -> AsyncIterator[RelayedCall]:
    person_ours, person = socket.socketpair()
    stream = HandedOverStream()
    stream.open("run-1", ClientConnection(person_ours.detach(), lambda _reason: None), ping_s=0)
    serving_ours, serving = socket.socketpair()
    loop = asyncio.get_running_loop()
    relay = Relay(Streams(), SECRET, timeout_s=5)
    transport, serving_side = await loop.connect_accepted_socket(relay.protocol, serving_ours)
    assert isinstance(serving_side, _ServingSide)
    serving_side.current = _Call(origin=("http", "127.0.0.1", 9), head=b"", key="k", stream=stream)
    person.setblocking(False)
    serving.setblocking(False)
    try:
        yield RelayedCall(_ProviderSide(serving_side), person, serving)
    finally:
        transport.close()
        stream.client.close()  # type: ignore[union-attr]
        person.close()
        serving.close()


async def test_a_read_of_several_http_chunks_is_one_write_to_the_person() -> None:
    """A provider's server sends each event as an HTTP chunk; a stream process that fell behind
    reads several in one read of the socket, and their parts go to the person in one write,
    the last with the answer's end among them."""
    async with relayed_call() as call:
        first = ANSWER_HEAD + b"".join(_http_chunk(_sse_chunk(p)) for p in PIECES[:3])
        call.provider.data_received(first)
        end = _http_chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"
        call.provider.data_received(_http_chunk(_sse_chunk(PIECES[3])) + end)  # the last read
        writes = []
        received = call.person.recv(65536)
        while received:
            size, rest = received.split(b"\r\n", 1)
            length = int(size, 16)
            writes.append(rest[:length].decode())
            received = rest[length + 2 :]
    deltas = [
        [
            json.loads(dict(_fields(f))["data"])["data"]["delta"]
            for f in re.split(r"\r?\n\r?\n", w)
            if f
        ]
        for w in writes
    ]
    assert deltas == [list(PIECES[:3]), [PIECES[3]]]


async def test_a_read_reaches_the_person_before_it_goes_back_to_the_serving_process() -> None:
    """200 first tokens come in one pass of the stream process's loop: each answer's bytes go
    back to its serving process after that pass, so every person's part read in it goes out
    first, and the serving process still gets every byte, in order."""
    reads = [ANSWER_HEAD, _http_chunk(_sse_chunk("Hello"))]
    async with relayed_call() as call:
        for read in reads:
            call.provider.data_received(read)
        # Within the pass: the person has the part, the serving process nothing yet.
        _size, frame = call.person.recv(65536).split(b"\r\n", 1)
        delta = json.loads(dict(_fields(frame.decode().strip()))["data"])["data"]["delta"]
        assert delta == "Hello"
        with pytest.raises(BlockingIOError):
            call.serving.recv(65536)
        passed_back = b""
        for _ in range(100):
            await asyncio.sleep(0.01)
            try:
                passed_back += call.serving.recv(65536)
            except BlockingIOError:
                if passed_back:
                    break
    assert passed_back == b"".join(reads)

"""The serving processes' streamed model calls, passed on to the provider and read on the way.

A relayed call (`providers.base.RelayRoute`) comes here instead of going to the provider:
`POST <relay>/<key>/<base>/<offset>/chat/completions`, the provider's base URL in a header. The
request goes on to the provider with its path and Host set back to the provider's (its API key
with it, held in memory for the call only), and every byte of the answer goes back as it came.
On the way the answer's body is decoded with the model SDK's own event-stream decoder and the
adapter's own chunk reader (`providers.openai_chat.read_chunk`), so each part of text is the
delta the serving process's engine will emit for it, and it goes to the stream `key` as soon as
the read of the socket that brought it is parsed, with the other parts of that read
(`streams.py`).

It is a byte pipe with a parser beside it (httptools, uvicorn's C parser), not a web server and
a client: under 200 streams at the slowest CPU's speed, a framework's cost a chunk made this
process as busy as the serving processes it relieves. One connection from a serving process is
paired with one connection to the provider, opened at its first request.

The path's secret is known only to the processes `pressloop serve` started: this is not a proxy
for anyone else on the machine.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import ssl
from dataclasses import dataclass, field
from typing import cast
from urllib.parse import urlsplit

import httptools
from openai._streaming import SSEDecoder, _SSELineDecoder  # the SDK's decoder, exactly

from pressloop.providers.openai_chat import UPSTREAM_HEADER, StreamState, read_chunk
from pressloop.streamer.streams import HandedOverStream, Streams

logger = logging.getLogger(__name__)

# Not passed on: this hop's own, or the relay's instructions.
DROPPED_HEADERS = frozenset(
    {
        b"host",
        b"content-length",  # set again for the body as it goes on (not chunked)
        b"transfer-encoding",
        b"accept-encoding",  # the answer is read here: asked for as it is
        UPSTREAM_HEADER.lower().encode(),
    }
)


class AnswerReader:
    """Cuts one streamed answer into the parts of text the engine emits, for `stream`."""

    def __init__(self, stream: HandedOverStream) -> None:
        self._stream = stream
        self._lines = _SSELineDecoder()
        self._events = SSEDecoder()
        self._state = StreamState()
        self._reading = True
        self._texts: list[str] = []  # the parts fed and not yet sent

    def feed(self, body: bytes) -> None:
        """A piece of the answer's body (an HTTP chunk: the provider's server sends one an event):
        its parts are kept until `send`."""
        if not self._reading:
            return
        try:
            for line in self._lines.feed(body):
                sse = self._events.decode(line.decode("utf-8"))
                if sse is not None and not self._take(sse.data, sse.event, self._texts):
                    self._reading = False
                    break
        except Exception:
            # The serving process's engine meets the same answer and says what is wrong; the
            # person's frames stop here and come with the commits.
            logger.warning("a relayed answer could not be read for its stream", exc_info=True)
            self._reading = False

    def send(self) -> None:
        """The parts fed since the last send go to the stream together: one write to the person
        for one read of the provider's socket, however many chunks it held: a stream process that
        fell behind (a burst of first tokens on a slow CPU) reads several at once, and a send each
        added to the work it was behind with (benchmarks.md, section 3ah)."""
        if self._texts:
            texts, self._texts = self._texts, []
            self._stream.read(texts)

    def _take(self, data: str, event: str | None, texts: list[str]) -> bool:
        """One event of the answer, its text added to `texts`; False once no more text can
        follow (the SDK's rules)."""
        if data.startswith("[DONE]") or event is not None:
            return False
        chunk = json.loads(data)
        if isinstance(chunk, dict) and chunk.get("error"):
            return False
        text = read_chunk(self._state, "relay", chunk)
        if text:
            texts.append(text)
        return True


@dataclass(kw_only=True)
class _Call:
    """One relayed request, as it goes on to the provider."""

    origin: tuple[str, str, int]  # scheme, host, port
    head: bytes
    key: str
    stream: HandedOverStream
    body: list[bytes] = field(default_factory=list)
    base: int = 0
    offset: int = 0


class _ProviderSide(asyncio.Protocol):
    """The provider's side of a relayed connection: the answer goes back as it comes, its body
    read on the way."""

    def __init__(self, client: _ServingSide) -> None:
        self._client = client
        self._parser = httptools.HttpResponseParser(self)
        self._reader: AnswerReader | None = None
        self._encoded = False
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self._client.forward(data)  # as it came: the serving process's SDK reads it
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError:
            logger.warning("a provider's answer could not be parsed: passed on unread")
            self._end_reading()
        else:
            if self._reader is not None:
                self._reader.send()

    def _end_reading(self) -> None:
        """What was read of the answer goes out; nothing more is read of it."""
        if self._reader is not None:
            self._reader.send()
        self._reader = None

    def on_message_begin(self) -> None:
        self._reader, self._encoded = None, False

    def on_header(self, name: bytes, value: bytes) -> None:
        if name.lower() == b"content-encoding" and value.lower() != b"identity":
            self._encoded = True  # compressed all the same: passed on unread

    def on_headers_complete(self) -> None:
        call = self._client.current
        if call is None:
            return
        if self._parser.get_status_code() == 200 and not self._encoded:
            call.stream.call_started(call.base, call.offset)
            self._reader = AnswerReader(call.stream)

    def on_body(self, body: bytes) -> None:
        if self._reader is not None:
            self._reader.feed(body)

    def on_message_complete(self) -> None:
        self._end_reading()
        self._client.answered()

    def connection_lost(self, exc: Exception | None) -> None:
        self._client.provider_lost()


class _ServingSide(asyncio.Protocol):
    """A serving process's connection: its requests, one at a time, to the provider."""

    def __init__(self, relay: Relay) -> None:
        self._relay = relay
        self._parser = httptools.HttpRequestParser(self)
        self._url = b""
        self._headers: list[tuple[bytes, bytes]] = []
        self._waiting: list[_Call] = []
        self.current: _Call | None = None
        self._call: _Call | None = None
        self._forwards: list[bytes] = []  # the answer's bytes not yet passed back
        self._provider: _ProviderSide | None = None
        self._origin: tuple[str, str, int] | None = None
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError:
            self._refuse(400, "not an HTTP request")

    def forward(self, data: bytes) -> None:
        """The answer's bytes, passed back once this pass of the event loop has written the
        person's parts of every answer read in it: 200 first tokens come in one pass, and a
        send to a serving process before each would keep the last person waiting for 199."""
        if not self._forwards:
            asyncio.get_running_loop().call_soon(self.flush)
        self._forwards.append(data)

    def flush(self) -> None:
        if self._forwards:
            data = b"".join(self._forwards)
            self._forwards.clear()
            self._pass_back(data)

    def write(self, data: bytes) -> None:
        self.flush()  # whatever came before goes first
        self._pass_back(data)

    def _pass_back(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    # The request parser's callbacks.
    def on_message_begin(self) -> None:
        self._url, self._headers, self._call = b"", [], None

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name, value))

    def on_headers_complete(self) -> None:
        method = self._parser.get_method()
        self._call = self._relay.call(method, self._url, self._headers)
        if self._call is None:
            self._refuse(404, "not found")

    def on_body(self, body: bytes) -> None:
        if self._call is not None:
            self._call.body.append(body)

    def on_message_complete(self) -> None:
        if self._call is not None:
            length = sum(len(piece) for piece in self._call.body)
            self._call.head += b"content-length: %d\r\n\r\n" % length
            self._waiting.append(self._call)
            self._call = None
            self._next()

    def _next(self) -> None:
        if self.current is not None or not self._waiting:
            return
        self.current = self._waiting.pop(0)
        asyncio.get_running_loop().create_task(self._send(self.current))

    async def _send(self, call: _Call) -> None:
        if self._provider is None or self._origin != call.origin:
            if self._provider is not None and self._provider.transport is not None:
                self._provider.transport.close()
            self._provider = None
            try:
                self._provider = await self._relay.connect(self, call.origin)
            except (OSError, ssl.SSLError, TimeoutError) as exc:
                self._relay.call_ended(call)
                self._refuse(502, f"the provider could not be reached: {exc}")
                return
            self._origin = call.origin
            if self.transport is None or self.transport.is_closing():
                self._relay.call_ended(call)
                self._provider.transport.close()  # type: ignore[union-attr]
                return
        provider = self._provider.transport
        assert provider is not None
        provider.write(call.head)
        for piece in call.body:
            provider.write(piece)

    def answered(self) -> None:
        if self.current is not None:
            self._relay.call_ended(self.current)
        self.current = None
        self._next()

    def provider_lost(self) -> None:
        self.flush()  # the answer's last bytes before the connection's end
        self._provider = None
        if self.current is not None:
            self._relay.call_ended(self.current)
            if self.transport is not None:
                self.transport.close()  # cut mid-answer: the serving process's SDK sees it so

    def _refuse(self, status: int, reason: str) -> None:
        body = reason.encode()
        head = b"HTTP/1.1 %d %s\r\ncontent-type: text/plain\r\ncontent-length: %d\r\n"
        self.write(head % (status, b"Refused", len(body)) + b"connection: close\r\n\r\n" + body)
        if self.transport is not None:
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        if self._provider is not None and self._provider.transport is not None:
            self._provider.transport.close()


class Relay:
    """The relayed calls of the serving processes that know `secret`."""

    def __init__(self, streams: Streams, secret: str, timeout_s: float) -> None:
        self._streams = streams
        self._secret = secret
        self._timeout_s = timeout_s
        self._tls = ssl.create_default_context()

    def protocol(self) -> asyncio.Protocol:
        return _ServingSide(self)

    def call(self, method: bytes, url: bytes, headers: list[tuple[bytes, bytes]]) -> _Call | None:
        """The request as it goes to the provider, or None when it is not a relayed call."""
        parsed = httptools.parse_url(url)
        parts = parsed.path.decode("latin-1").split("/", 6)
        # "", "relay", secret, key, base, offset, the provider's path
        if len(parts) != 7 or parts[1] != "relay":
            return None
        if not hmac.compare_digest(parts[2], self._secret):
            return None
        upstream = dict(headers).get(UPSTREAM_HEADER.lower().encode(), b"").decode("latin-1")
        target = urlsplit(upstream)
        if target.scheme not in ("http", "https") or not target.hostname:
            return None
        try:
            base, offset = int(parts[4]), int(parts[5])
        except ValueError:
            return None
        port = target.port or (443 if target.scheme == "https" else 80)
        path = f"{target.path.rstrip('/')}/{parts[6]}".encode()
        if parsed.query:
            path += b"?" + parsed.query
        lines = [b"%s %s HTTP/1.1" % (method, path), b"host: " + target.netloc.encode()]
        lines += [
            name + b": " + value for name, value in headers if name.lower() not in DROPPED_HEADERS
        ]
        return _Call(
            origin=(target.scheme, target.hostname, port),
            head=b"\r\n".join(lines) + b"\r\n",  # its length follows, with the body
            key=parts[3],
            stream=self._streams.for_call(parts[3]),
            base=base,
            offset=offset,
        )

    def call_ended(self, call: _Call) -> None:
        self._streams.call_ended(call.key)

    async def connect(self, client: _ServingSide, origin: tuple[str, str, int]) -> _ProviderSide:
        scheme, host, port = origin
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(self._timeout_s):
            _, protocol = await loop.create_connection(
                lambda: _ProviderSide(client),
                host,
                port,
                ssl=self._tls if scheme == "https" else None,
            )
        return protocol

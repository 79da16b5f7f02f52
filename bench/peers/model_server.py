"""The scripted model every system talks to: an OpenAI-compatible chat-completions server.

It runs in its own process, so every system pays the real client cost (the `openai` SDK over
HTTP), and it is a bare asyncio HTTP/1.1 server rather than a web framework: with 1,000 turns in
flight it answers about 1,000 requests a second, and a framework's per-request cost would make
the model, not the system under test, the bottleneck on a 2-core machine.

The script is stateless, so any number of turns can run at once: a request whose transcript
holds fewer than 3 tool results after its last user message is answered with one call to the
no-op tool `noop`; otherwise with the final text. The behaviour is chosen by the URL:

    /m/{latency_ms}_{gap_ms}_{hold}/v1/chat/completions

- latency_ms: wait this long before answering (the 1 s model: 1000);
- gap_ms: when streaming, wait this long between the final text's tokens;
- hold: a request whose transcript holds this many tool results is never answered (-1: none);
  the crash test kills the system while it waits.

The final text's first token is `[t<ns>]`: the server's `time.monotonic_ns()` (CLOCK_MONOTONIC,
shared by every process on the machine) taken just before the token is written to the socket,
so a client can tell how long the token took to reach it. A user message containing
`[probe:NAME]` has the tool-result count of each of its requests recorded (`GET /stats`).

    python -m bench.peers.model_server --port 0    # prints "listening <port>"
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

ROUNDS = 3
TOOL = "noop"
FINAL_WORDS = [" Done:", " the", " no-op", " tool", " ran", " three", " times,", " all", " ok."]
PROBE = re.compile(r"\[probe:([\w.-]+)\]")
STAMP = re.compile(r"\[t(\d+)\]")
CREATED = 1_767_225_600


def base_url(port: int, *, latency_ms: int = 0, gap_ms: int = 0, hold: int = -1) -> str:
    """The OpenAI base URL (ending in /v1) for one behaviour of the server on `port`."""
    return f"http://127.0.0.1:{port}/m/{latency_ms}_{gap_ms}_{hold}/v1"


@dataclass(kw_only=True)
class Behaviour:
    latency_s: float = 0.0
    gap_s: float = 0.0
    hold: int = -1

    @classmethod
    def parse(cls, path: str) -> Behaviour:
        parts = path.split("/")
        if len(parts) < 3 or parts[1] != "m":
            return cls()
        latency, gap, hold = (int(p) for p in parts[2].split("_"))
        return cls(latency_s=latency / 1000, gap_s=gap / 1000, hold=hold)


def tool_results(messages: list[dict[str, Any]]) -> int:
    """Tool results after the last user message: the round the turn is in."""
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    return sum(1 for m in messages[last_user + 1 :] if m.get("role") == "tool")


def probe_of(messages: list[dict[str, Any]]) -> str | None:
    for message in reversed(messages):
        if message.get("role") == "user":
            found = PROBE.search(str(message.get("content")))
            return found.group(1) if found else None
    return None


@dataclass(kw_only=True)
class Stats:
    requests: int = 0
    held: int = 0
    probes: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))


def _chunk(model: str, delta: dict[str, Any] | None, finish: str | None = None) -> bytes:
    return _sse(_chunk_payload(model, delta, finish))


def _chunk_payload(
    model: str, delta: dict[str, Any] | None, finish: str | None = None
) -> dict[str, Any]:
    return {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": model,
        "choices": []
        if delta is None
        else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }


def _sse(payload: dict[str, Any] | str) -> bytes:
    data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    text = f"data: {data}\n\n".encode()
    return b"%x\r\n%s\r\n" % (len(text), text)  # one HTTP chunk per SSE event


USAGE = {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60}


class ModelServer:
    def __init__(self) -> None:
        self.stats = Stats()
        self.server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        self.server = await asyncio.start_server(self._connection, host, port, backlog=4096)
        return int(self.server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            for writer in list(self._writers):  # Python 3.11's close() leaves them open
                writer.close()
            await self.server.wait_closed()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while True:
                line = await reader.readline()
                if not line:
                    return
                method, target, _version = line.decode("latin-1").split(" ", 2)
                headers: dict[str, str] = {}
                while (header := await reader.readline()) not in (b"\r\n", b"\n", b""):
                    name, value = header.decode("latin-1").split(":", 1)
                    headers[name.strip().lower()] = value.strip()
                length = int(headers.get("content-length", "0"))
                body = await reader.readexactly(length) if length else b""
                await self._respond(method, target, body, reader, writer)
                if headers.get("connection", "").lower() == "close":
                    return
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            return
        finally:
            self._writers.discard(writer)
            writer.close()

    async def _respond(
        self,
        method: str,
        target: str,
        body: bytes,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        path = target.split("?", 1)[0]
        if method == "GET" and path == "/stats":
            stats = {"requests": self.stats.requests, "held": self.stats.held}
            await _json(writer, {**stats, "probes": dict(self.stats.probes)})
            return
        if method != "POST" or not path.endswith("/chat/completions"):
            await _json(writer, {"error": {"message": f"no route {path}"}}, status=404)
            return
        behaviour = Behaviour.parse(path)
        request = json.loads(body)
        messages = request.get("messages") or []
        done = tool_results(messages)
        self.stats.requests += 1
        probe = probe_of(messages)
        if probe is not None:
            self.stats.probes[probe].append(done)
        if done == behaviour.hold:
            self.stats.held += 1
            await reader.read()  # until the client goes away (the crash test kills it)
            raise ConnectionResetError
        if behaviour.latency_s:
            await asyncio.sleep(behaviour.latency_s)
        model = str(request.get("model") or "bench")
        call = None if done >= ROUNDS else f"call_{done}_{uuid.uuid4().hex[:12]}"
        if request.get("stream"):
            options = request.get("stream_options") or {}
            await self._stream(writer, model, call, behaviour, bool(options.get("include_usage")))
        else:
            await _json(writer, _completion(model, call))

    async def _stream(
        self,
        writer: asyncio.StreamWriter,
        model: str,
        call: str | None,
        behaviour: Behaviour,
        include_usage: bool,
    ) -> None:
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\ncache-control: no-cache\r\n\r\n"
        )
        writer.write(_chunk(model, {"role": "assistant", "content": ""}))
        if call is not None:
            function = {"name": TOOL, "arguments": ""}
            first = {"index": 0, "id": call, "type": "function", "function": function}
            writer.write(_chunk(model, {"tool_calls": [first]}))
            more = {"index": 0, "function": {"arguments": "{}"}}
            writer.write(_chunk(model, {"tool_calls": [more]}))
            finish = "tool_calls"
        else:
            await writer.drain()
            # The stamp is taken as late as possible: right before its token is written.
            writer.write(_chunk(model, {"content": f"[t{time.monotonic_ns()}]"}))
            for word in FINAL_WORDS:
                if behaviour.gap_s:
                    await writer.drain()
                    await asyncio.sleep(behaviour.gap_s)
                writer.write(_chunk(model, {"content": word}))
            finish = "stop"
        writer.write(_chunk(model, {}, finish))
        if include_usage:
            writer.write(_sse({**_chunk_payload(model, None), "usage": USAGE}))
        writer.write(_sse("[DONE]"))
        writer.write(b"0\r\n\r\n")
        await writer.drain()


def _completion(model: str, call: str | None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": None}
    if call is not None:
        function = {"name": TOOL, "arguments": "{}"}
        message["tool_calls"] = [{"id": call, "type": "function", "function": function}]
    else:
        message["content"] = f"[t{time.monotonic_ns()}]" + "".join(FINAL_WORDS)
    return {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": CREATED,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "stop" if call is None else "tool_calls",
            }
        ],
        "usage": USAGE,
    }


async def _json(writer: asyncio.StreamWriter, payload: dict[str, Any], status: int = 200) -> None:
    body = json.dumps(payload, separators=(",", ":")).encode()
    reason = b"OK" if status == 200 else b"Not Found"
    writer.write(
        b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
        % (status, reason, len(body), body)
    )
    await writer.drain()


async def _serve(port: int) -> None:
    server = ModelServer()
    bound = await server.start(port=port)
    print(f"listening {bound}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await server.close()


def main() -> None:
    parser = argparse.ArgumentParser(description="The scripted OpenAI-compatible model server.")
    parser.add_argument("--port", type=int, default=0)
    options = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(options.port))


if __name__ == "__main__":
    main()

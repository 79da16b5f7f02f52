"""A scripted HTTP server on 127.0.0.1, the base of the fake model providers.

A test queues what the server answers (`Reply`, `ErrorReply`, `RawReply`), in order, one per
request; the server records every request it gets. Anything unexpected — a request beyond the
script, a request that breaks the provider's protocol rules — is recorded as a problem, and
`verify()` (called by the fixtures at teardown) fails the test if there is any problem or if a
scripted answer was never asked for.

The server runs uvicorn in a thread with its own event loop, so it serves sync and async tests
alike (and subprocesses, given `base_url`). Subclasses speak a real protocol: they say which path
they answer and how a `Reply` looks as JSON and as SSE.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import socket
import threading
from dataclasses import dataclass, field
from typing import Any, Self

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route


@dataclass(kw_only=True, frozen=True)
class ToolCall:
    """A tool call in a scripted answer. A `str` for `arguments` is sent verbatim (it may be
    malformed JSON on purpose); a dict is encoded."""

    id: str
    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)

    def arguments_json(self) -> str:
        return self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)


@dataclass(kw_only=True, frozen=True)
class ErrorReply:
    """An error answer with the provider's real error body (`type` defaults from the status).

    As a `Reply.stream_error`, it is sent as an error event inside a stream that began with 200.
    """

    status: int
    message: str
    type: str | None = None
    delay_s: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(kw_only=True, frozen=True)
class Reply:
    """A successful model answer: JSON, or SSE when the request says `"stream": true`.

    Streamed text is sent in `deltas` when given, else in pieces of `chunk_chars` characters;
    tool-call arguments are streamed in pieces too. `stream_error` cuts a stream short after
    the text deltas with an in-stream error event.
    """

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    input_tokens: int = 11
    output_tokens: int = 7
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0
    finish_reason: str | None = None
    model: str | None = None
    deltas: tuple[str, ...] | None = None
    chunk_chars: int = 4
    delay_s: float = 0.0
    stream_error: ErrorReply | None = None

    def text_pieces(self) -> list[str]:
        if self.deltas is not None:
            return list(self.deltas)
        size = self.chunk_chars
        return [self.text[i : i + size] for i in range(0, len(self.text), size)]


@dataclass(kw_only=True, frozen=True)
class RawReply:
    """Bytes sent as they are: garbage, an empty body, a truncated stream."""

    body: bytes | str = b""
    status: int = 200
    content_type: str = "application/json"
    delay_s: float = 0.0


Scripted = Reply | ErrorReply | RawReply


@dataclass(kw_only=True, frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any  # the decoded JSON body, or the raw text when it is not JSON

    @property
    def streamed(self) -> bool:
        return isinstance(self.body, dict) and self.body.get("stream") is True


class _Uvicorn(uvicorn.Server):
    """uvicorn that reports when it listens and can be stopped without its 0.1 s polling."""

    def __init__(self, config: uvicorn.Config, ready: threading.Event) -> None:
        super().__init__(config)
        self._ready = ready
        self.loop: asyncio.AbstractEventLoop | None = None
        self.stopping: asyncio.Event | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        self.loop = asyncio.get_running_loop()
        self.stopping = asyncio.Event()
        await super().startup(sockets=sockets)
        self._ready.set()

    async def main_loop(self) -> None:
        assert self.stopping is not None
        await self.stopping.wait()

    def stop(self) -> None:
        self.should_exit = True
        if self.loop is not None and self.stopping is not None:
            self.loop.call_soon_threadsafe(self.stopping.set)


class ScriptedServer:
    """Base class: subclasses set `provider`, `path`, `base_path` and implement `render`.

    Those with a `models_path` also answer `GET` there (the provider's model list, which
    `pressloop doctor` asks for to check the key): a scripted `Reply` is the list (its `model`
    the one model listed), an `ErrorReply` the provider's error."""

    provider = "fake"
    path = "/"
    base_path = ""  # what the SDK's base_url adds to the origin (e.g. "/v1" for OpenAI)
    models_path: str | None = None

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._script: list[Scripted] = []
        self._requests: list[RecordedRequest] = []
        self._problems: list[str] = []
        self._socket: socket.socket | None = None
        self._server: _Uvicorn | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> Self:
        # IPPROTO_TCP: asyncio then turns Nagle off, as a real provider does (an answer in two
        # writes would otherwise wait ~40 ms for the delayed ACK on a kept-alive connection).
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self._socket.bind(("127.0.0.1", 0))
        routes = [Route(self.path, self._handle, methods=["POST"])]
        if self.models_path is not None:
            routes.append(Route(self.models_path, self._handle_models, methods=["GET"]))
        app = Starlette(routes=routes)
        config = uvicorn.Config(
            app, log_config=None, log_level="warning", access_log=False, lifespan="off"
        )
        ready = threading.Event()
        self._server = _Uvicorn(config, ready)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True
        )
        self._thread.start()
        if not ready.wait(timeout=10):
            raise RuntimeError(f"the fake {self.provider} server did not start")
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._socket is not None:
            self._socket.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def origin(self) -> str:
        assert self._socket is not None, "start() the server first"
        host, port = self._socket.getsockname()[:2]
        return f"http://{host}:{port}"

    @property
    def base_url(self) -> str:
        """What to give the provider SDK as its base URL."""
        return self.origin + self.base_path

    # -- script -------------------------------------------------------------------------------

    def push(self, *items: Scripted) -> None:
        """Queue answers, served in order, one per request."""
        with self._lock:
            self._script.extend(items)

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    @property
    def bodies(self) -> list[Any]:
        return [request.body for request in self.requests]

    def verify(self) -> None:
        """Fail if anything unexpected happened or a scripted answer was never used."""
        with self._lock:
            problems = list(self._problems)
            if self._script:
                problems.append(f"{len(self._script)} scripted answer(s) never asked for")
        if problems:
            raise AssertionError(f"fake {self.provider} server: " + "; ".join(problems))

    def reset(self) -> None:
        with self._lock:
            self._script.clear()
            self._requests.clear()
            self._problems.clear()

    # -- serving ------------------------------------------------------------------------------

    async def _handle(self, request: Request) -> Response:
        raw = await request.body()
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = raw.decode(errors="replace")
        recorded = RecordedRequest(
            method=request.method, path=request.url.path, headers=dict(request.headers), body=body
        )
        protocol_problems = self.check(recorded)
        item, number = self._take(recorded, protocol_problems)
        if protocol_problems:
            return self.render_error(ErrorReply(status=400, message=protocol_problems[0]))
        if item is None:
            return self.render_error(
                ErrorReply(status=500, message=f"fake server: no answer scripted for #{number}")
            )
        await self._delay(item.delay_s)
        if isinstance(item, RawReply):
            return Response(item.body, status_code=item.status, media_type=item.content_type)
        if isinstance(item, ErrorReply):
            return self.render_error(item)
        return self.render(item, recorded)

    async def _handle_models(self, request: Request) -> Response:
        recorded = RecordedRequest(
            method=request.method, path=request.url.path, headers=dict(request.headers), body=None
        )
        protocol_problems = self.check_models(recorded)
        item, number = self._take(recorded, protocol_problems)
        if protocol_problems:
            return self.render_error(ErrorReply(status=400, message=protocol_problems[0]))
        if item is None or isinstance(item, RawReply):
            return self.render_error(
                ErrorReply(status=500, message=f"fake server: no model list scripted for #{number}")
            )
        await self._delay(item.delay_s)
        if isinstance(item, ErrorReply):
            return self.render_error(item)
        return JSONResponse(self.render_models(item.model or "fake-model"))

    def _take(self, recorded: RecordedRequest, problems: list[str]) -> tuple[Scripted | None, int]:
        """Record a request and its protocol problems; the next scripted answer, if any."""
        with self._lock:
            self._requests.append(recorded)
            number = len(self._requests)
            self._problems.extend(f"request #{number}: {p}" for p in problems)
            item = self._script.pop(0) if self._script else None
            if item is None:
                self._problems.append(f"request #{number} came after the script was used up")
        return item, number

    async def _delay(self, seconds: float) -> None:
        # Cut short when the server stops, so a timed-out request never delays teardown.
        if seconds <= 0 or self._server is None or self._server.stopping is None:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._server.stopping.wait(), seconds)

    # -- what subclasses provide --------------------------------------------------------------

    def check(self, request: RecordedRequest) -> list[str]:
        """Protocol rules the real provider enforces; each broken rule is a problem."""
        return []

    def render(self, reply: Reply, request: RecordedRequest) -> Response:
        raise NotImplementedError

    def check_models(self, request: RecordedRequest) -> list[str]:
        """The protocol rules of `GET models_path` (the key's header, a version header)."""
        return []

    def render_models(self, model: str) -> dict[str, Any]:
        """The model list as the provider sends it, with one model."""
        raise NotImplementedError

    def render_error(self, error: ErrorReply) -> Response:
        return JSONResponse({"error": error.message}, status_code=error.status)


def bad_tool_names(body: dict[str, Any], most: int) -> list[str]:
    """The API's rule for tool names, in the tools and in the history's calls (a 400)."""
    pattern = re.compile(rf"^[a-zA-Z0-9_-]{{1,{most}}}$")
    names = [t.get("name") or (t.get("function") or {}).get("name") for t in body.get("tools", [])]
    for message in body.get("messages", []):
        names += [c["function"]["name"] for c in message.get("tool_calls") or []]
        content = message.get("content")
        if isinstance(content, list):
            names += [b.get("name") for b in content if b.get("type") == "tool_use"]
    return [
        f"tool name {name!r} does not match {pattern.pattern}"
        for name in names
        if not pattern.match(str(name))
    ]

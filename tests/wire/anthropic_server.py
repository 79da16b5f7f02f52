"""A fake Anthropic Messages server speaking the real wire protocol.

`POST /v1/messages` answers a `Reply` as a `message` object, or, when the request says
`"stream": true`, as the real SSE sequence: `message_start`, then per content block
`content_block_start` / `content_block_delta` (`text_delta`, `input_json_delta`) /
`content_block_stop`, then `message_delta` (stop reason, output tokens) and `message_stop`, with a
`ping` early on as Anthropic sends. Errors carry Anthropic's error body. It also rejects what the
real API rejects: no `max_tokens`, roles that do not alternate, empty text blocks, and tool uses
not answered by `tool_result` blocks at the start of the very next user message.

    with FakeAnthropicServer() as server:
        server.push(Reply(text="Hello"))
        provider = AnthropicMessagesProvider(api_key="k", model="m", base_url=server.base_url, ...)
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from starlette.responses import JSONResponse, Response, StreamingResponse

from tests.wire.scripted_server import (
    ErrorReply,
    RecordedRequest,
    Reply,
    ScriptedServer,
    bad_tool_names,
)

# The `error.type` Anthropic sends, by status.
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


def _error_body(error: ErrorReply) -> dict[str, Any]:
    kind = error.type or ERROR_TYPES.get(error.status, "api_error")
    return {
        "type": "error",
        "error": {"type": kind, "message": error.message},
        "request_id": "req_fake",
    }


class FakeAnthropicServer(ScriptedServer):
    provider = "anthropic"
    path = "/v1/messages"
    base_path = ""  # the SDK adds /v1/messages itself
    models_path = "/v1/models"

    def check(self, request: RecordedRequest) -> list[str]:
        body = request.body
        if not isinstance(body, dict):
            return ["the body is not a JSON object"]
        problems = [f"{key}: Field required" for key in ("model", "max_tokens") if key not in body]
        # The API takes the key as `x-api-key`; newer SDKs send it as a bearer token.
        if not (request.headers.get("x-api-key") or request.headers.get("authorization")):
            problems.append("no API key (x-api-key or Authorization)")
        problems += bad_tool_names(body, 128)
        system = body.get("system")
        if isinstance(system, list) and any(not b.get("text", "").strip() for b in system):
            problems.append("system: text content blocks must be non-empty")
        expected = "user"
        open_calls: set[str] = set()
        for position, message in enumerate(body.get("messages") or []):
            where = f"messages.{position}"
            role, content = message.get("role"), message.get("content")
            if role != expected:
                problems.append(f"{where}: roles must alternate, starting with user")
            expected = "assistant" if role == "user" else "user"
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            types = [block.get("type") for block in blocks]
            if any(b.get("type") == "text" and not b.get("text", "").strip() for b in blocks):
                problems.append(f"{where}: text content blocks must be non-empty")
            if role == "user":
                results = [
                    str(b.get("tool_use_id")) for b in blocks if b.get("type") == "tool_result"
                ]
                if set(results) != open_calls:
                    problems.append(
                        f"{where}: tool_use ids {sorted(open_calls)} need tool_result blocks "
                        f"in this message, got {sorted(results)}"
                    )
                if types[: len(results)] != ["tool_result"] * len(results):
                    problems.append(f"{where}: tool_result blocks must come first")
                open_calls = set()
            else:
                open_calls = {b["id"] for b in blocks if b.get("type") == "tool_use"}
        if not body.get("messages"):
            problems.append("messages: at least one message is required")
        return problems

    def render_error(self, error: ErrorReply) -> Response:
        return JSONResponse(_error_body(error), status_code=error.status, headers=error.headers)

    def render(self, reply: Reply, request: RecordedRequest) -> Response:
        model = reply.model or request.body.get("model", "claude-test")
        stop = reply.finish_reason or ("tool_use" if reply.tool_calls else "end_turn")
        if request.streamed:
            return StreamingResponse(_events(reply, model, stop), media_type="text/event-stream")
        content: list[dict[str, Any]] = []
        if reply.text:
            content.append({"type": "text", "text": reply.text})
        for call in reply.tool_calls:
            arguments = call.arguments
            if isinstance(arguments, str):  # as the API would hold it: a decoded object
                arguments = json.loads(arguments)
            content.append(
                {"type": "tool_use", "id": call.id, "name": call.name, "input": arguments}
            )
        message = {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": _usage(reply),
        }
        # As the streamed chunks: ASCII, escapes for the rest (a lone surrogate has no UTF-8).
        return Response(json.dumps(message), media_type="application/json")

    def check_models(self, request: RecordedRequest) -> list[str]:
        problems = []
        if not request.headers.get("x-api-key"):
            problems.append("x-api-key header is required")
        if not request.headers.get("anthropic-version"):
            problems.append("anthropic-version: header is required")
        return problems

    def render_models(self, model: str) -> dict[str, Any]:
        listed = {
            "type": "model",
            "id": model,
            "display_name": model,
            "created_at": "2026-01-01T00:00:00Z",
        }
        return {"data": [listed], "has_more": False, "first_id": model, "last_id": model}


def _usage(reply: Reply) -> dict[str, int]:
    return {
        "input_tokens": reply.input_tokens,
        "output_tokens": reply.output_tokens,
        "cache_read_input_tokens": reply.cache_read_tokens,
        "cache_creation_input_tokens": reply.cache_creation_tokens,
    }


def _event(kind: str, **data: Any) -> str:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"


def _events(reply: Reply, model: str, stop: str) -> Iterator[str]:
    start: dict[str, Any] = {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        # Output tokens are counted in message_delta; message_start carries the prompt side.
        "usage": {**_usage(reply), "output_tokens": 1},
    }
    yield _event("message_start", message=start)
    yield _event("ping")
    index = 0
    if reply.text or reply.stream_error is not None:
        yield _event("content_block_start", index=index, content_block={"type": "text", "text": ""})
        for piece in reply.text_pieces():
            delta = {"type": "text_delta", "text": piece}
            yield _event("content_block_delta", index=index, delta=delta)
        if reply.stream_error is not None:
            yield _event("error", error=_error_body(reply.stream_error)["error"])
            return
        yield _event("content_block_stop", index=index)
        index += 1
    for call in reply.tool_calls:
        block = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
        yield _event("content_block_start", index=index, content_block=block)
        arguments = call.arguments_json()
        for begin in range(0, len(arguments), 7):
            delta = {"type": "input_json_delta", "partial_json": arguments[begin : begin + 7]}
            yield _event("content_block_delta", index=index, delta=delta)
        yield _event("content_block_stop", index=index)
        index += 1
    stopped = {"stop_reason": stop, "stop_sequence": None}
    yield _event("message_delta", delta=stopped, usage={"output_tokens": reply.output_tokens})
    yield _event("message_stop")

"""A fake OpenAI Chat Completions server speaking the real wire protocol.

`POST /v1/chat/completions` answers a `Reply` as a `chat.completion` object, or, when the request
says `"stream": true`, as `data: {chat.completion.chunk}` SSE lines ending with `data: [DONE]`
(the usage chunk only when `stream_options.include_usage` asked for it, as OpenAI does). Errors
carry OpenAI's error body. It also rejects transcripts OpenAI rejects: a tool message that
answers no open tool call, or an assistant tool call left unanswered.

    with FakeOpenAIServer() as server:
        server.push(Reply(text="Hello"))
        provider = OpenAIChatProvider(api_key="k", model="m", base_url=server.base_url, ...)
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

# The `type` OpenAI puts in error bodies, by status.
ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", None),
    503: ("server_error", None),
}

CREATED = 1_767_225_600  # fixed, so recorded answers are reproducible


class FakeOpenAIServer(ScriptedServer):
    provider = "openai"
    path = "/v1/chat/completions"
    base_path = "/v1"
    models_path = "/v1/models"

    def check(self, request: RecordedRequest) -> list[str]:
        body = request.body
        if not isinstance(body, dict):
            return ["the body is not a JSON object"]
        problems = [f"missing {key!r}" for key in ("model", "messages") if key not in body]
        if not request.headers.get("authorization", "").startswith("Bearer "):
            problems.append("no bearer token in the Authorization header")
        problems += bad_tool_names(body, 64)
        open_calls: set[str] = set()
        for position, message in enumerate(body.get("messages", [])):
            role = message.get("role")
            if role == "tool":
                call_id = message.get("tool_call_id")
                if call_id not in open_calls:
                    problems.append(
                        f"messages[{position}]: tool_call_id {call_id!r} answers no call"
                    )
                open_calls.discard(call_id)
                continue
            if open_calls:
                problems.append(
                    f"messages[{position}]: tool calls {sorted(open_calls)} were not answered"
                )
                open_calls.clear()
            if role == "assistant":
                open_calls = {call["id"] for call in message.get("tool_calls") or []}
            elif role not in ("system", "user", "developer"):
                problems.append(f"messages[{position}]: unknown role {role!r}")
        return problems

    def render_error(self, error: ErrorReply) -> Response:
        kind, code = ERROR_TYPES.get(error.status, ("server_error", None))
        body = {
            "error": {
                "message": error.message,
                "type": error.type or kind,
                "param": None,
                "code": code,
            }
        }
        return JSONResponse(body, status_code=error.status, headers=error.headers)

    def render(self, reply: Reply, request: RecordedRequest) -> Response:
        model = reply.model or request.body.get("model", "gpt-test")
        finish = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
        if request.streamed:
            options = request.body.get("stream_options") or {}
            chunks = _chunks(reply, model, finish, bool(options.get("include_usage")))
            return StreamingResponse(chunks, media_type="text/event-stream")
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments_json()},
                }
                for call in reply.tool_calls
            ]
        completion = {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": CREATED,
            "model": model,
            "choices": [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
            ],
            "usage": _usage(reply),
            "system_fingerprint": None,
        }
        # As the streamed chunks: ASCII, escapes for the rest (a lone surrogate has no UTF-8).
        return Response(json.dumps(completion), media_type="application/json")

    def check_models(self, request: RecordedRequest) -> list[str]:
        if not request.headers.get("authorization", "").startswith("Bearer "):
            return ["no bearer token in the Authorization header"]
        return []

    def render_models(self, model: str) -> dict[str, Any]:
        listed = {"id": model, "object": "model", "created": CREATED, "owned_by": "system"}
        return {"object": "list", "data": [listed]}


def _usage(reply: Reply) -> dict[str, int]:
    return {
        "prompt_tokens": reply.input_tokens,
        "completion_tokens": reply.output_tokens,
        "total_tokens": reply.input_tokens + reply.output_tokens,
    }


def _chunks(reply: Reply, model: str, finish: str, include_usage: bool) -> Iterator[str]:
    def chunk(delta: dict[str, Any] | None, finish_reason: str | None = None) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": model,
            "system_fingerprint": None,
            "choices": []
            if delta is None
            else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
        }
        if include_usage:  # OpenAI then sends `"usage": null` until the last chunk
            payload["usage"] = None
        return payload

    def data(payload: dict[str, Any]) -> str:
        return f"data: {json.dumps(payload)}\n\n"

    yield data(chunk({"role": "assistant", "content": "", "refusal": None}))
    for text in reply.text_pieces():
        yield data(chunk({"content": text}))
    if reply.stream_error is not None:
        kind, code = ERROR_TYPES.get(reply.stream_error.status, ("server_error", None))
        error = {"message": reply.stream_error.message, "type": reply.stream_error.type or kind}
        yield data({"error": {**error, "param": None, "code": code}})
        return
    for index, call in enumerate(reply.tool_calls):
        # The id, type and name come first with empty arguments, then the arguments in pieces.
        head = {"index": index, "id": call.id, "type": "function"}
        yield data(
            chunk({"tool_calls": [{**head, "function": {"name": call.name, "arguments": ""}}]})
        )
        arguments = call.arguments_json()
        for begin in range(0, len(arguments), 7):
            piece = {"index": index, "function": {"arguments": arguments[begin : begin + 7]}}
            yield data(chunk({"tool_calls": [piece]}))
    yield data(chunk({}, finish))
    if include_usage:
        yield data({**chunk(None), "usage": _usage(reply)})
    yield "data: [DONE]\n\n"

"""OpenAIChatProvider against a fake server speaking the Chat Completions wire protocol."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator

import pytest

from pressloop.contracts import ActionCall, Message, Role, Usage
from pressloop.errors import ProviderError
from pressloop.providers.base import (
    ModelRequest,
    ModelResponse,
    ResponseDone,
    StreamPart,
    TextDelta,
    ToolSpec,
)
from pressloop.providers.openai_chat import OpenAIChatProvider
from tests.wire.openai_server import FakeOpenAIServer
from tests.wire.scripted_server import ErrorReply, RawReply, Reply, ToolCall

CREATE_POST = ToolSpec(
    name="create_post",
    description="Create a draft post.",
    parameters={
        "type": "object",
        "properties": {"title": {"type": "string"}, "content": {"type": "string"}},
        "required": ["title"],
    },
)


def ask(text: str = "Hello?", **kwargs: object) -> ModelRequest:
    return ModelRequest(
        system="You run a WordPress site.",
        messages=[Message(role=Role.USER, content=text)],
        **kwargs,  # type: ignore[arg-type]
    )


@pytest.fixture
async def provider(openai_server: FakeOpenAIServer) -> AsyncIterator[OpenAIChatProvider]:
    provider = OpenAIChatProvider(
        api_key="sk-test", model="gpt-test", base_url=openai_server.base_url, timeout_s=5
    )
    yield provider
    await provider.aclose()


async def collect(provider: OpenAIChatProvider, request: ModelRequest) -> list[StreamPart]:
    return [part async for part in provider.stream(request)]


async def test_plain_answer_and_usage(
    provider: OpenAIChatProvider, openai_server: FakeOpenAIServer
) -> None:
    openai_server.push(Reply(text="Hi there.", input_tokens=42, output_tokens=5, model="gpt-x-1"))

    response = await provider.complete(ask(max_output_tokens=300))

    assert response == ModelResponse(
        text="Hi there.",
        usage=Usage(input_tokens=42, output_tokens=5, model_calls=1),
        finish_reason="stop",
        model="gpt-x-1",
    )
    (request,) = openai_server.requests
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.body["model"] == "gpt-test"
    assert request.body["messages"] == [
        {"role": "system", "content": "You run a WordPress site."},
        {"role": "user", "content": "Hello?"},
    ]
    assert request.body["max_completion_tokens"] == 300
    assert "max_tokens" not in request.body
    assert "tools" not in request.body  # omitted when there are none
    assert "response_format" not in request.body


async def test_tools_are_offered_and_tool_calls_decoded(
    provider: OpenAIChatProvider, openai_server: FakeOpenAIServer
) -> None:
    openai_server.push(
        Reply(
            text="Creating it.",
            tool_calls=(
                ToolCall(id="call_1", name="create_post", arguments={"title": "Spring"}),
                ToolCall(id="call_2", name="list_posts", arguments={"per_page": 5}),
            ),
        )
    )

    response = await provider.complete(ask(tools=[CREATE_POST]))

    assert response.text == "Creating it."
    assert response.finish_reason == "tool_calls"
    assert response.tool_calls == [
        ActionCall(id="call_1", name="create_post", params={"title": "Spring"}),
        ActionCall(id="call_2", name="list_posts", params={"per_page": 5}),
    ]
    assert openai_server.bodies[0]["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "create_post",
                "description": "Create a draft post.",
                "parameters": CREATE_POST.parameters,
            },
        }
    ]


@pytest.mark.parametrize("arguments", ['{"title": "Spring"', "[1, 2]", "not json"])
async def test_malformed_tool_arguments_are_kept_raw(
    provider: OpenAIChatProvider, openai_server: FakeOpenAIServer, arguments: str
) -> None:
    openai_server.push(
        Reply(tool_calls=(ToolCall(id="call_1", name="create_post", arguments=arguments),))
    )

    response = await provider.complete(ask())

    assert response.tool_calls == [
        ActionCall(id="call_1", name="create_post", params={"_raw_arguments": arguments})
    ]


async def test_transcript_mapping_on_the_wire(
    provider: OpenAIChatProvider, openai_server: FakeOpenAIServer
) -> None:
    openai_server.push(Reply(text="Done: both posts exist."))
    calls = [
        ActionCall(id="call_a", name="create_post", params={"title": "One"}),
        ActionCall(id="call_b", name="create_post", params={"title": "Two"}),
    ]
    request = ModelRequest(
        system="SYSTEM",
        messages=[
            Message(role=Role.USER, content="Make two posts."),
            Message(role=Role.ASSISTANT, content="", tool_calls=calls),
            Message(role=Role.TOOL, tool_call_id="call_a", name="create_post", content="id 7"),
            Message(role=Role.TOOL, tool_call_id="call_b", name="create_post", content="id 8"),
            Message(role=Role.ASSISTANT, content="Both created."),
            Message(role=Role.USER, content="Thanks!"),
        ],
    )

    await provider.complete(request)

    assert openai_server.bodies[0]["messages"] == [
        {"role": "system", "content": "SYSTEM"},
        {"role": "user", "content": "Make two posts."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "create_post", "arguments": '{"title": "One"}'},
                },
                {
                    "id": "call_b",
                    "type": "function",
                    "function": {"name": "create_post", "arguments": '{"title": "Two"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": "id 7"},
        {"role": "tool", "tool_call_id": "call_b", "content": "id 8"},
        {"role": "assistant", "content": "Both created."},
        {"role": "user", "content": "Thanks!"},
    ]


async def test_response_schema_becomes_a_json_schema_response_format(
    provider: OpenAIChatProvider, openai_server: FakeOpenAIServer
) -> None:
    schema = {"type": "object", "properties": {"reply": {"type": "string"}}}
    openai_server.push(Reply(text='{"reply": "ok"}'))

    response = await provider.complete(ask(response_schema=schema))

    assert response.text == '{"reply": "ok"}'
    assert openai_server.bodies[0]["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "decision", "schema": schema, "strict": False},
    }


async def test_stream_yields_deltas_in_order_then_the_final_response(
    provider: OpenAIChatProvider, openai_server: FakeOpenAIServer
) -> None:
    openai_server.push(
        Reply(text="Hello, world!", deltas=("Hel", "lo, ", "world!"), input_tokens=30)
    )

    parts = await collect(provider, ask())

    assert parts == [
        TextDelta(text="Hel"),
        TextDelta(text="lo, "),
        TextDelta(text="world!"),
        ResponseDone(
            response=ModelResponse(
                text="Hello, world!",
                usage=Usage(input_tokens=30, output_tokens=7, model_calls=1),
                finish_reason="stop",
                model="gpt-test",
            )
        ),
    ]
    body = openai_server.bodies[0]
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


async def test_stream_accumulates_tool_call_deltas_by_index(
    provider: OpenAIChatProvider, openai_server: FakeOpenAIServer
) -> None:
    long_content = "A long paragraph " * 5
    openai_server.push(
        Reply(
            tool_calls=(
                ToolCall(
                    id="call_1",
                    name="create_post",
                    arguments={"title": "Spring", "content": long_content},
                ),
                ToolCall(id="call_2", name="publish_post", arguments={"id": 7}),
            ),
        )
    )

    parts = await collect(provider, ask(tools=[CREATE_POST]))

    assert len(parts) == 1  # no text, so no deltas: only the final response
    done = parts[0]
    assert isinstance(done, ResponseDone)
    assert done.response.tool_calls == [
        ActionCall(
            id="call_1", name="create_post", params={"title": "Spring", "content": long_content}
        ),
        ActionCall(id="call_2", name="publish_post", params={"id": 7}),
    ]
    assert done.response.finish_reason == "tool_calls"
    assert done.response.usage.output_tokens == 7


async def test_error_inside_a_stream_is_a_retryable_provider_error(
    provider: OpenAIChatProvider, openai_server: FakeOpenAIServer
) -> None:
    openai_server.push(
        Reply(
            text="Partial",
            deltas=("Part", "ial"),
            stream_error=ErrorReply(status=500, message="The server had an error"),
        )
    )
    seen: list[StreamPart] = []

    with pytest.raises(ProviderError) as caught:
        async for part in provider.stream(ask()):
            seen.append(part)

    assert seen == [TextDelta(text="Part"), TextDelta(text="ial")]
    assert caught.value.retryable is True
    assert "The server had an error" in caught.value.message


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (400, "Invalid schema for function 'create_post'"),
        (401, "Incorrect API key provided: sk-test"),
        (403, "Country, region, or territory not supported"),
        (404, "The model `gpt-nope` does not exist"),
        (422, "Unprocessable entity"),
    ],
)
async def test_client_errors_are_not_retryable(
    provider: OpenAIChatProvider, openai_server: FakeOpenAIServer, status: int, message: str
) -> None:
    openai_server.push(ErrorReply(status=status, message=message))

    with pytest.raises(ProviderError) as caught:
        await provider.complete(ask())

    assert caught.value.retryable is False
    assert caught.value.message == f"openai answered {status}: {message}"
    assert len(openai_server.requests) == 1


@pytest.mark.parametrize("status", [429, 500, 502, 503])
async def test_rate_limits_and_server_errors_are_retryable(
    provider: OpenAIChatProvider, openai_server: FakeOpenAIServer, status: int
) -> None:
    openai_server.push(ErrorReply(status=status, message="Please slow down"))

    with pytest.raises(ProviderError) as caught:
        await provider.complete(ask())

    assert caught.value.retryable is True
    assert caught.value.message == f"openai answered {status}: Please slow down"
    assert len(openai_server.requests) == 1  # the SDK itself never retries


async def test_stream_errors_before_any_delta_are_mapped_too(
    provider: OpenAIChatProvider, openai_server: FakeOpenAIServer
) -> None:
    openai_server.push(ErrorReply(status=401, message="Incorrect API key provided"))

    with pytest.raises(ProviderError) as caught:
        await collect(provider, ask())

    assert caught.value.retryable is False
    assert caught.value.message == "openai answered 401: Incorrect API key provided"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (RawReply(body="<html>oops</html>", content_type="text/html"), "not JSON"),
        (RawReply(body="{not json"), "not JSON"),
        (RawReply(body=b""), "not JSON"),
        (RawReply(body='{"object": "list", "data": []}'), "not a chat completion"),
        (RawReply(body='{"choices": []}'), "not a chat completion"),
        (RawReply(body='{"choices": [{"message": "hi"}]}'), "not a chat completion"),
    ],
)
async def test_garbage_bodies_are_clear_provider_errors(
    provider: OpenAIChatProvider, openai_server: FakeOpenAIServer, raw: RawReply, expected: str
) -> None:
    openai_server.push(raw)

    with pytest.raises(ProviderError) as caught:
        await provider.complete(ask())

    assert caught.value.message.startswith("openai answered with a body that is ")
    assert expected in caught.value.message
    assert caught.value.retryable is True


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (RawReply(body="data: {broken\n\n", content_type="text/event-stream"), "not JSON"),
        (RawReply(body="", content_type="text/event-stream"), "an empty stream"),
        (RawReply(body='data: {"choices": 3}\n\n', content_type="text/event-stream"), "shape"),
    ],
)
async def test_garbage_streams_are_clear_provider_errors(
    provider: OpenAIChatProvider, openai_server: FakeOpenAIServer, raw: RawReply, expected: str
) -> None:
    openai_server.push(raw)

    with pytest.raises(ProviderError) as caught:
        await collect(provider, ask())

    assert expected in caught.value.message
    assert caught.value.retryable is True


async def test_a_slow_server_is_a_retryable_timeout(openai_server: FakeOpenAIServer) -> None:
    openai_server.push(Reply(text="too late", delay_s=5))
    provider = OpenAIChatProvider(
        api_key="sk-test", model="gpt-test", base_url=openai_server.base_url, timeout_s=0.2
    )

    with pytest.raises(ProviderError) as caught:
        await provider.complete(ask())
    await provider.aclose()

    assert caught.value.retryable is True
    assert caught.value.message == "openai did not answer in time (request timed out)"


async def test_nobody_listening_is_a_retryable_connection_error() -> None:
    with socket.socket() as probe:  # a port that was free a moment ago
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    provider = OpenAIChatProvider(
        api_key="k", model="m", base_url=f"http://127.0.0.1:{port}/v1", timeout_s=2, name="glm"
    )

    with pytest.raises(ProviderError) as caught:
        await provider.complete(ask())
    await provider.aclose()

    assert caught.value.retryable is True
    assert caught.value.message.startswith("could not reach glm")


async def test_name_and_extra_headers_for_compatible_services(
    openai_server: FakeOpenAIServer,
) -> None:
    provider = OpenAIChatProvider(
        api_key="or-key",
        model="anthropic/claude-sonnet-4-5",
        base_url=openai_server.base_url,
        timeout_s=5,
        name="openrouter",
        extra_headers={"X-Title": "Pressloop"},
    )
    openai_server.push(ErrorReply(status=402, message="Insufficient credits"))

    with pytest.raises(ProviderError) as caught:
        await provider.complete(ask())
    await provider.aclose()

    assert (provider.name, provider.model, provider.supports_tools) == (
        "openrouter",
        "anthropic/claude-sonnet-4-5",
        True,
    )
    assert caught.value.message == "openrouter answered 402: Insufficient credits"
    assert caught.value.retryable is False
    (request,) = openai_server.requests
    assert request.headers["x-title"] == "Pressloop"
    assert request.headers["authorization"] == "Bearer or-key"
    assert json.loads(json.dumps(request.body))["model"] == "anthropic/claude-sonnet-4-5"


async def test_a_changed_catalog_is_sent_as_it_is_now(
    provider: OpenAIChatProvider, openai_server: FakeOpenAIServer
) -> None:
    """The catalog is serialized once and reused: a call with other tools sends those."""
    renamed = ToolSpec(
        name="create_page", description="Create a page.", parameters=CREATE_POST.parameters
    )
    for _ in range(3):
        openai_server.push(Reply(text="ok"))
    await provider.complete(ask(tools=[CREATE_POST]))
    await provider.complete(ask(tools=[CREATE_POST, renamed]))
    await provider.complete(ask())

    sent = [[t["function"]["name"] for t in body.get("tools", [])] for body in openai_server.bodies]
    assert sent == [["create_post"], ["create_post", "create_page"], []]
    assert "tools" not in openai_server.bodies[2]
    assert [r.headers["content-type"] for r in openai_server.requests] == ["application/json"] * 3

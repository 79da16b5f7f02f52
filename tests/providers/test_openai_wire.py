"""OpenAIChatProvider against a fake server speaking the Chat Completions wire protocol: requests
and answers (its failures: test_openai_wire_errors.py)."""

from __future__ import annotations

import json

import pytest

from pressloop.contracts import ActionCall, Message, Role, Usage
from pressloop.errors import ProviderError
from pressloop.providers.base import (
    ModelRequest,
    ModelResponse,
    ResponseDone,
    TextDelta,
    ToolSpec,
)
from pressloop.providers.openai_chat import OpenAIChatProvider
from tests.providers.openai_calls import CREATE_POST, ask, collect
from tests.providers.sdk_headers import provider_headers
from tests.wire.openai_server import FakeOpenAIServer
from tests.wire.scripted_server import ErrorReply, Reply, ToolCall


async def test_plain_answer_and_usage(
    openai_provider: OpenAIChatProvider, openai_server: FakeOpenAIServer
) -> None:
    openai_server.push(Reply(text="Hi there.", input_tokens=42, output_tokens=5, model="gpt-x-1"))

    response = await openai_provider.complete(ask(max_output_tokens=300))

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
    openai_provider: OpenAIChatProvider, openai_server: FakeOpenAIServer
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

    response = await openai_provider.complete(ask(tools=[CREATE_POST]))

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
    openai_provider: OpenAIChatProvider, openai_server: FakeOpenAIServer, arguments: str
) -> None:
    openai_server.push(
        Reply(tool_calls=(ToolCall(id="call_1", name="create_post", arguments=arguments),))
    )

    response = await openai_provider.complete(ask())

    assert response.tool_calls == [
        ActionCall(id="call_1", name="create_post", params={"_raw_arguments": arguments})
    ]


async def test_transcript_mapping_on_the_wire(
    openai_provider: OpenAIChatProvider, openai_server: FakeOpenAIServer
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

    await openai_provider.complete(request)

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
    openai_provider: OpenAIChatProvider, openai_server: FakeOpenAIServer
) -> None:
    schema = {"type": "object", "properties": {"reply": {"type": "string"}}}
    openai_server.push(Reply(text='{"reply": "ok"}'))

    response = await openai_provider.complete(ask(response_schema=schema))

    assert response.text == '{"reply": "ok"}'
    assert openai_server.bodies[0]["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "decision", "schema": schema, "strict": False},
    }


async def test_stream_yields_deltas_in_order_then_the_final_response(
    openai_provider: OpenAIChatProvider, openai_server: FakeOpenAIServer
) -> None:
    openai_server.push(
        Reply(text="Hello, world!", deltas=("Hel", "lo, ", "world!"), input_tokens=30)
    )

    parts = await collect(openai_provider, ask())

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
    openai_provider: OpenAIChatProvider, openai_server: FakeOpenAIServer
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

    parts = await collect(openai_provider, ask(tools=[CREATE_POST]))

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
    openai_provider: OpenAIChatProvider, openai_server: FakeOpenAIServer
) -> None:
    """The catalog is serialized once and reused: a call with other tools sends those."""
    renamed = ToolSpec(
        name="create_page", description="Create a page.", parameters=CREATE_POST.parameters
    )
    for _ in range(3):
        openai_server.push(Reply(text="ok"))
    await openai_provider.complete(ask(tools=[CREATE_POST]))
    await openai_provider.complete(ask(tools=[CREATE_POST, renamed]))
    await openai_provider.complete(ask())

    sent = [[t["function"]["name"] for t in body.get("tools", [])] for body in openai_server.bodies]
    assert sent == [["create_post"], ["create_post", "create_page"], []]
    assert "tools" not in openai_server.bodies[2]
    assert [r.headers["content-type"] for r in openai_server.requests] == ["application/json"] * 3


async def test_a_streamed_call_sends_what_the_sdk_sends(openai_server: FakeOpenAIServer) -> None:
    """Streamed calls skip the SDK's per-call request building (`stream_calls.py`): the same
    address, key, extra headers and SDK identification go out as on a call through `post`."""
    provider = OpenAIChatProvider(
        api_key="or-key",
        model="m",
        base_url=openai_server.base_url,
        timeout_s=5,
        name="openrouter",
        extra_headers={"X-Title": "Pressloop", "HTTP-Referer": "https://example.org"},
    )
    openai_server.push(Reply(text="whole"), Reply(text="streamed", deltas=("stream", "ed")))
    await provider.complete(ask())
    parts = await collect(provider, ask())
    await provider.aclose()

    done = parts[-1]
    assert isinstance(done, ResponseDone) and done.response.text == "streamed"
    posted, streamed = openai_server.requests
    assert posted.path == streamed.path == "/v1/chat/completions"
    sent = provider_headers(streamed.headers)
    assert sent == provider_headers(posted.headers)
    assert sent["authorization"] == "Bearer or-key" and sent["x-title"] == "Pressloop"
    assert sent["user-agent"].startswith("AsyncOpenAI/Python")
    assert "x-stainless-package-version" in sent
    assert streamed.body["stream"] is True and "stream" not in posted.body

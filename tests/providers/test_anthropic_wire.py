"""AnthropicMessagesProvider against a fake server speaking the Messages wire protocol: requests
and answers (its failures: test_anthropic_wire_errors.py)."""

from __future__ import annotations

from pressloop.contracts import ActionCall, Message, Role, Usage
from pressloop.providers.anthropic_messages import AnthropicMessagesProvider
from pressloop.providers.base import (
    ModelRequest,
    ModelResponse,
    ResponseDone,
    TextDelta,
)
from tests.providers.anthropic_calls import CREATE_POST, ask, collect
from tests.providers.sdk_headers import provider_headers
from tests.wire.anthropic_server import FakeAnthropicServer
from tests.wire.scripted_server import Reply, ToolCall


async def test_plain_answer_system_prompt_and_usage(
    anthropic_provider: AnthropicMessagesProvider, anthropic_server: FakeAnthropicServer
) -> None:
    anthropic_server.push(
        Reply(
            text="Hi there.",
            input_tokens=20,
            cache_read_tokens=1000,
            cache_creation_tokens=300,
            output_tokens=6,
            model="claude-test-20260101",
        )
    )

    response = await anthropic_provider.complete(ask())

    assert response == ModelResponse(
        text="Hi there.",
        usage=Usage(input_tokens=1320, output_tokens=6, model_calls=1),  # cached tokens count
        finish_reason="end_turn",
        model="claude-test-20260101",
    )
    (request,) = anthropic_server.requests
    assert request.path == "/v1/messages"
    assert "sk-ant-test" in (
        request.headers.get("x-api-key", "") + request.headers["authorization"]
    )
    assert request.headers["anthropic-version"]
    assert request.body["model"] == "claude-test"
    assert request.body["max_tokens"] == 4096  # required by the API: our default
    assert request.body["system"] == [
        {
            "type": "text",
            "text": "You run a WordPress site.",
            "cache_control": {"type": "ephemeral"},
        }
    ]
    assert request.body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Hello?"}]}
    ]
    assert "tools" not in request.body


async def test_tools_are_offered_and_tool_uses_decoded(
    anthropic_provider: AnthropicMessagesProvider, anthropic_server: FakeAnthropicServer
) -> None:
    anthropic_server.push(
        Reply(
            text="Let me create it.",
            tool_calls=(
                ToolCall(id="toolu_01", name="create_post", arguments={"title": "Spring"}),
                ToolCall(id="toolu_02", name="list_posts", arguments={}),
            ),
        )
    )

    response = await anthropic_provider.complete(ask(tools=[CREATE_POST], max_output_tokens=512))

    assert response.text == "Let me create it."
    assert response.finish_reason == "tool_use"
    assert response.tool_calls == [
        ActionCall(id="toolu_01", name="create_post", params={"title": "Spring"}),
        ActionCall(id="toolu_02", name="list_posts", params={}),
    ]
    body = anthropic_server.bodies[0]
    assert body["max_tokens"] == 512
    assert body["tools"] == [
        {
            "name": "create_post",
            "description": "Create a draft post.",
            "input_schema": CREATE_POST.parameters,
        }
    ]


async def test_transcript_mapping_on_the_wire(
    anthropic_provider: AnthropicMessagesProvider, anthropic_server: FakeAnthropicServer
) -> None:
    """Tool results of one assistant turn go in ONE user message, first; roles alternate."""
    anthropic_server.push(Reply(text="Both posts exist."))
    calls = [
        ActionCall(id="toolu_a", name="create_post", params={"title": "One"}),
        ActionCall(id="toolu_b", name="create_post", params={"title": "Two"}),
    ]
    request = ModelRequest(
        system="SYSTEM",
        messages=[
            Message(role=Role.USER, content="Make two posts."),
            Message(role=Role.USER, content="Drafts only."),
            Message(role=Role.ASSISTANT, content="On it.", tool_calls=calls),
            Message(role=Role.TOOL, tool_call_id="toolu_a", content="id 7"),
            Message(role=Role.TOOL, tool_call_id="toolu_b", content="id 8"),
            Message(role=Role.USER, content="(2 of 2 actions ran)"),
            Message(role=Role.ASSISTANT, content="", tool_calls=[calls[0]]),
            Message(role=Role.TOOL, tool_call_id="toolu_a", content="id 9"),
        ],
    )

    await anthropic_provider.complete(request)

    use_a = {"type": "tool_use", "id": "toolu_a", "name": "create_post", "input": {"title": "One"}}
    use_b = {"type": "tool_use", "id": "toolu_b", "name": "create_post", "input": {"title": "Two"}}
    assert anthropic_server.bodies[0]["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Make two posts."},
                {"type": "text", "text": "Drafts only."},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "On it."},
                use_a,
                use_b,
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": "id 7"},
                {"type": "tool_result", "tool_use_id": "toolu_b", "content": "id 8"},
                {"type": "text", "text": "(2 of 2 actions ran)"},
            ],
        },
        {
            "role": "assistant",
            # An empty text block would be rejected: only the tool use is sent.
            "content": [use_a],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_a", "content": "id 9"}],
        },
    ]


async def test_stream_yields_text_deltas_then_the_final_response(
    anthropic_provider: AnthropicMessagesProvider, anthropic_server: FakeAnthropicServer
) -> None:
    anthropic_server.push(
        Reply(
            text="Hello, world!",
            deltas=("Hel", "lo, ", "world!"),
            input_tokens=25,
            cache_read_tokens=100,
            output_tokens=9,
        )
    )

    parts = await collect(anthropic_provider, ask())

    assert parts == [
        TextDelta(text="Hel"),
        TextDelta(text="lo, "),
        TextDelta(text="world!"),
        ResponseDone(
            response=ModelResponse(
                text="Hello, world!",
                # Prompt side from message_start, output from message_delta.
                usage=Usage(input_tokens=125, output_tokens=9, model_calls=1),
                finish_reason="end_turn",
                model="claude-test",
            )
        ),
    ]
    assert anthropic_server.bodies[0]["stream"] is True


async def test_stream_accumulates_input_json_deltas_per_tool_use(
    anthropic_provider: AnthropicMessagesProvider, anthropic_server: FakeAnthropicServer
) -> None:
    anthropic_server.push(
        Reply(
            text="Two calls.",
            tool_calls=(
                ToolCall(id="toolu_1", name="create_post", arguments={"title": "A longer title"}),
                ToolCall(id="toolu_2", name="update_settings", arguments={"title": "Site", "n": 3}),
                ToolCall(id="toolu_3", name="create_post", arguments='{"title": "cut'),
            ),
        )
    )

    parts = await collect(anthropic_provider, ask(tools=[CREATE_POST]))

    assert "".join(p.text for p in parts if isinstance(p, TextDelta)) == "Two calls."
    done = parts[-1]
    assert isinstance(done, ResponseDone)
    assert done.response.text == "Two calls."
    assert done.response.finish_reason == "tool_use"
    assert done.response.tool_calls == [
        ActionCall(id="toolu_1", name="create_post", params={"title": "A longer title"}),
        ActionCall(id="toolu_2", name="update_settings", params={"title": "Site", "n": 3}),
        ActionCall(id="toolu_3", name="create_post", params={"_raw_arguments": '{"title": "cut'}),
    ]


async def test_the_body_goes_as_json_with_its_tools(
    anthropic_provider: AnthropicMessagesProvider, anthropic_server: FakeAnthropicServer
) -> None:
    """The body is handed to the SDK as bytes (the catalog serialized once): still JSON."""
    for _ in range(2):
        anthropic_server.push(Reply(text="ok"))
    await anthropic_provider.complete(ask(tools=[CREATE_POST]))
    await anthropic_provider.complete(ask())

    assert [r.headers["content-type"] for r in anthropic_server.requests] == [
        "application/json"
    ] * 2
    assert [t["name"] for t in anthropic_server.bodies[0]["tools"]] == ["create_post"]
    assert "tools" not in anthropic_server.bodies[1]


async def test_a_streamed_call_sends_what_the_sdk_sends(
    anthropic_provider: AnthropicMessagesProvider, anthropic_server: FakeAnthropicServer
) -> None:
    """Streamed calls skip the SDK's per-call request building (`stream_calls.py`): the same
    address, key, API version and SDK identification go out as on a call through `post`."""
    anthropic_server.push(Reply(text="whole"), Reply(text="streamed", deltas=("stream", "ed")))
    await anthropic_provider.complete(ask())
    parts = await collect(anthropic_provider, ask())

    done = parts[-1]
    assert isinstance(done, ResponseDone) and done.response.text == "streamed"
    posted, streamed = anthropic_server.requests
    assert posted.path == streamed.path == "/v1/messages"
    sent = provider_headers(streamed.headers)
    assert sent == provider_headers(posted.headers)
    assert "anthropic-version" in sent and "x-stainless-package-version" in sent
    assert sent["user-agent"].startswith("AsyncAnthropic/Python")
    assert streamed.body["stream"] is True and "stream" not in posted.body

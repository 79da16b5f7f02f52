"""The fake servers fail a test when they should: other tests rely on these checks."""

from __future__ import annotations

import pytest

from pressloop.contracts import ActionCall, Message, Role
from pressloop.errors import ProviderError
from pressloop.providers.anthropic_messages import AnthropicMessagesProvider
from pressloop.providers.base import ModelRequest
from pressloop.providers.openai_chat import OpenAIChatProvider
from tests.wire.anthropic_server import FakeAnthropicServer
from tests.wire.openai_server import FakeOpenAIServer
from tests.wire.scripted_server import Reply

# A tool result that answers no tool call: both real APIs reject this transcript.
ORPHAN_RESULT = ModelRequest(
    system="S",
    messages=[
        Message(role=Role.USER, content="Hi"),
        Message(role=Role.ASSISTANT, content="Hello."),
        Message(role=Role.TOOL, tool_call_id="call_x", content="stray"),
    ],
)


async def test_openai_fake_rejects_a_broken_transcript_and_fails_verify() -> None:
    with FakeOpenAIServer() as server:
        server.push(Reply(text="never sent"))
        provider = OpenAIChatProvider(api_key="k", model="m", base_url=server.base_url, timeout_s=5)
        with pytest.raises(ProviderError) as caught:
            await provider.complete(ORPHAN_RESULT)
        await provider.aclose()

        assert caught.value.retryable is False
        assert "answers no call" in caught.value.message
        with pytest.raises(AssertionError, match="answers no call"):
            server.verify()


async def test_anthropic_fake_rejects_a_broken_transcript_and_fails_verify() -> None:
    with FakeAnthropicServer() as server:
        server.push(Reply(text="never sent"))
        provider = AnthropicMessagesProvider(
            api_key="k", model="m", base_url=server.base_url, timeout_s=5
        )
        with pytest.raises(ProviderError) as caught:
            await provider.complete(ORPHAN_RESULT)
        await provider.aclose()

        assert caught.value.message.startswith("anthropic answered 400: ")
        with pytest.raises(AssertionError, match="need tool_result blocks"):
            server.verify()


async def test_unused_answers_and_extra_requests_fail_verify() -> None:
    request = ModelRequest(system="S", messages=[Message(role=Role.USER, content="Hi")])
    with FakeOpenAIServer() as server:
        server.push(Reply(text="one"), Reply(text="two"))
        provider = OpenAIChatProvider(api_key="k", model="m", base_url=server.base_url, timeout_s=5)
        await provider.complete(request)
        with pytest.raises(AssertionError, match="1 scripted answer"):
            server.verify()

        await provider.complete(request)
        server.verify()  # the script is used up exactly: all is well

        with pytest.raises(ProviderError):
            await provider.complete(request)
        await provider.aclose()
        with pytest.raises(AssertionError, match="came after the script was used up"):
            server.verify()


async def test_anthropic_tool_results_go_first_in_their_user_message(
    anthropic_server: FakeAnthropicServer,
) -> None:
    anthropic_server.push(Reply(text="ok"))
    provider = AnthropicMessagesProvider(
        api_key="k", model="m", base_url=anthropic_server.base_url, timeout_s=5
    )
    call = ActionCall(id="toolu_1", name="list_posts")
    request = ModelRequest(
        system="S",
        messages=[
            Message(role=Role.USER, content="List posts."),
            Message(role=Role.ASSISTANT, tool_calls=[call]),
            Message(role=Role.USER, content="Also, be brief."),
            Message(role=Role.TOOL, tool_call_id="toolu_1", content="[]"),
        ],
    )

    await provider.complete(request)
    await provider.aclose()

    assert anthropic_server.bodies[0]["messages"][-1] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "[]"},
            {"type": "text", "text": "Also, be brief."},
        ],
    }

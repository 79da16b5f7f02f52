"""What the Anthropic adapter's wire tests share: a request, a tool, the provider on the fake
server, a stream collected, and the two ways a call goes out."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from pressloop.contracts import Message, Role
from pressloop.providers.anthropic_messages import AnthropicMessagesProvider
from pressloop.providers.base import ModelRequest, StreamPart, ToolSpec
from tests.wire.anthropic_server import FakeAnthropicServer

CREATE_POST = ToolSpec(
    name="create_post",
    description="Create a draft post.",
    parameters={"type": "object", "properties": {"title": {"type": "string"}}},
)


def ask(text: str = "Hello?", **kwargs: object) -> ModelRequest:
    return ModelRequest(
        system="You run a WordPress site.",
        messages=[Message(role=Role.USER, content=text)],
        **kwargs,  # type: ignore[arg-type]
    )


@pytest.fixture
async def anthropic_provider(
    anthropic_server: FakeAnthropicServer,
) -> AsyncIterator[AnthropicMessagesProvider]:
    provider = AnthropicMessagesProvider(
        api_key="sk-ant-test", model="claude-test", base_url=anthropic_server.base_url, timeout_s=5
    )
    yield provider
    await provider.aclose()


async def collect(provider: AnthropicMessagesProvider, request: ModelRequest) -> list[StreamPart]:
    return [part async for part in provider.stream(request)]


# A call through the SDK's `post` (`complete`) and a streamed one (`stream_calls.py`): what fails
# on the wire must fail the same on both.
WAYS = ("complete", "stream")


async def call(provider: AnthropicMessagesProvider, way: str) -> None:
    if way == "complete":
        await provider.complete(ask())
    else:
        await collect(provider, ask())

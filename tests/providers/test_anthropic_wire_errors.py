"""AnthropicMessagesProvider's failures on the wire: HTTP errors, error events inside a stream,
bodies and streams that are not what the protocol says, a slow server. Each is a clear
`ProviderError`, retryable or not, whichever way the call went out."""

from __future__ import annotations

import pytest

from pressloop.errors import ProviderError
from pressloop.providers.anthropic_messages import AnthropicMessagesProvider
from pressloop.providers.base import StreamPart, TextDelta
from tests.providers.anthropic_calls import WAYS, ask, call, collect
from tests.wire.anthropic_server import FakeAnthropicServer
from tests.wire.scripted_server import ErrorReply, RawReply, Reply


async def test_error_event_inside_a_stream(
    anthropic_provider: AnthropicMessagesProvider, anthropic_server: FakeAnthropicServer
) -> None:
    anthropic_server.push(
        Reply(
            text="Part",
            deltas=("Pa", "rt"),
            stream_error=ErrorReply(status=529, message="Overloaded"),
        )
    )
    seen: list[StreamPart] = []

    with pytest.raises(ProviderError) as caught:
        async for part in anthropic_provider.stream(ask()):
            seen.append(part)

    assert seen == [TextDelta(text="Pa"), TextDelta(text="rt")]
    assert caught.value.retryable is True
    assert caught.value.message == "anthropic stream failed (overloaded_error): Overloaded"


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (400, "messages: roles must alternate"),
        (401, "invalid x-api-key"),
        (403, "Your API key does not have permission to use the specified resource."),
        (404, "model: claude-nope"),
    ],
)
@pytest.mark.parametrize("way", WAYS)
async def test_client_errors_are_not_retryable(
    anthropic_provider: AnthropicMessagesProvider,
    anthropic_server: FakeAnthropicServer,
    status: int,
    message: str,
    way: str,
) -> None:
    anthropic_server.push(ErrorReply(status=status, message=message))

    with pytest.raises(ProviderError) as caught:
        await call(anthropic_provider, way)

    assert caught.value.retryable is False
    assert caught.value.message == f"anthropic answered {status}: {message}"
    assert len(anthropic_server.requests) == 1


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("status", [429, 500, 529])
async def test_rate_limits_and_overload_are_retryable(
    anthropic_provider: AnthropicMessagesProvider,
    anthropic_server: FakeAnthropicServer,
    status: int,
    way: str,
) -> None:
    anthropic_server.push(ErrorReply(status=status, message="Try again later"))

    with pytest.raises(ProviderError) as caught:
        await call(anthropic_provider, way)

    assert caught.value.retryable is True
    assert caught.value.message == f"anthropic answered {status}: Try again later"
    assert len(anthropic_server.requests) == 1


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (RawReply(body="<html>bad gateway</html>", content_type="text/html"), "not JSON"),
        (RawReply(body="{truncated"), "not JSON"),
        (RawReply(body=b""), "not JSON"),
        (RawReply(body='{"type": "message", "content": "hi"}'), "not a message"),
        (RawReply(body="[]"), "not a message"),
    ],
)
async def test_garbage_bodies_are_clear_provider_errors(
    anthropic_provider: AnthropicMessagesProvider,
    anthropic_server: FakeAnthropicServer,
    raw: RawReply,
    expected: str,
) -> None:
    anthropic_server.push(raw)

    with pytest.raises(ProviderError) as caught:
        await anthropic_provider.complete(ask())

    assert caught.value.message.startswith("anthropic answered with a body that is ")
    assert expected in caught.value.message
    assert caught.value.retryable is True


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("event: message_start\ndata: {nope\n\n", "not JSON"),
        ('event: message_start\ndata: {"type": "message_start"}\n\n', "ended before message_stop"),
        ('event: content_block_delta\ndata: {"index": 0}\n\n', "wrong shape"),
        ("", "ended before message_stop"),
    ],
)
async def test_garbage_streams_are_clear_provider_errors(
    anthropic_provider: AnthropicMessagesProvider,
    anthropic_server: FakeAnthropicServer,
    body: str,
    expected: str,
) -> None:
    anthropic_server.push(RawReply(body=body, content_type="text/event-stream"))

    with pytest.raises(ProviderError) as caught:
        await collect(anthropic_provider, ask())

    assert expected in caught.value.message
    assert caught.value.retryable is True


@pytest.mark.parametrize("way", WAYS)
async def test_a_slow_server_is_a_retryable_timeout(
    anthropic_server: FakeAnthropicServer, way: str
) -> None:
    anthropic_server.push(Reply(text="too late", delay_s=5))
    provider = AnthropicMessagesProvider(
        api_key="k", model="claude-test", base_url=anthropic_server.base_url, timeout_s=0.2
    )

    with pytest.raises(ProviderError) as caught:
        await call(provider, way)
    await provider.aclose()

    assert caught.value.retryable is True
    assert caught.value.message == "anthropic did not answer in time (request timed out)"

"""OpenAIChatProvider's failures on the wire: HTTP errors, errors inside a stream, bodies and
streams that are not what the protocol says, a slow server, nobody listening. Each is a clear
`ProviderError`, retryable or not."""

from __future__ import annotations

import socket

import pytest

from pressloop.errors import ProviderError
from pressloop.providers.base import StreamPart, TextDelta
from pressloop.providers.openai_chat import OpenAIChatProvider
from tests.providers.openai_calls import WAYS, ask, call, collect
from tests.wire.openai_server import FakeOpenAIServer
from tests.wire.scripted_server import ErrorReply, RawReply, Reply


async def test_error_inside_a_stream_is_a_retryable_provider_error(
    openai_provider: OpenAIChatProvider, openai_server: FakeOpenAIServer
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
        async for part in openai_provider.stream(ask()):
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
@pytest.mark.parametrize("way", WAYS)
async def test_client_errors_are_not_retryable(
    openai_provider: OpenAIChatProvider,
    openai_server: FakeOpenAIServer,
    status: int,
    message: str,
    way: str,
) -> None:
    openai_server.push(ErrorReply(status=status, message=message))

    with pytest.raises(ProviderError) as caught:
        await call(openai_provider, way)

    assert caught.value.retryable is False
    assert caught.value.message == f"openai answered {status}: {message}"
    assert len(openai_server.requests) == 1


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("status", [429, 500, 502, 503])
async def test_rate_limits_and_server_errors_are_retryable(
    openai_provider: OpenAIChatProvider, openai_server: FakeOpenAIServer, status: int, way: str
) -> None:
    openai_server.push(ErrorReply(status=status, message="Please slow down"))

    with pytest.raises(ProviderError) as caught:
        await call(openai_provider, way)

    assert caught.value.retryable is True
    assert caught.value.message == f"openai answered {status}: Please slow down"
    assert len(openai_server.requests) == 1  # the SDK itself never retries


async def test_stream_errors_before_any_delta_are_mapped_too(
    openai_provider: OpenAIChatProvider, openai_server: FakeOpenAIServer
) -> None:
    openai_server.push(ErrorReply(status=401, message="Incorrect API key provided"))

    with pytest.raises(ProviderError) as caught:
        await collect(openai_provider, ask())

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
    openai_provider: OpenAIChatProvider,
    openai_server: FakeOpenAIServer,
    raw: RawReply,
    expected: str,
) -> None:
    openai_server.push(raw)

    with pytest.raises(ProviderError) as caught:
        await openai_provider.complete(ask())

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
    openai_provider: OpenAIChatProvider,
    openai_server: FakeOpenAIServer,
    raw: RawReply,
    expected: str,
) -> None:
    openai_server.push(raw)

    with pytest.raises(ProviderError) as caught:
        await collect(openai_provider, ask())

    assert expected in caught.value.message
    assert caught.value.retryable is True


@pytest.mark.parametrize("way", WAYS)
async def test_a_slow_server_is_a_retryable_timeout(
    openai_server: FakeOpenAIServer, way: str
) -> None:
    openai_server.push(Reply(text="too late", delay_s=5))
    provider = OpenAIChatProvider(
        api_key="sk-test", model="gpt-test", base_url=openai_server.base_url, timeout_s=0.2
    )

    with pytest.raises(ProviderError) as caught:
        await call(provider, way)
    await provider.aclose()

    assert caught.value.retryable is True
    assert caught.value.message == "openai did not answer in time (request timed out)"


@pytest.mark.parametrize("way", WAYS)
async def test_nobody_listening_is_a_retryable_connection_error(way: str) -> None:
    with socket.socket() as probe:  # a port that was free a moment ago
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    provider = OpenAIChatProvider(
        api_key="k", model="m", base_url=f"http://127.0.0.1:{port}/v1", timeout_s=2, name="glm"
    )

    with pytest.raises(ProviderError) as caught:
        await call(provider, way)
    await provider.aclose()

    assert caught.value.retryable is True
    assert caught.value.message.startswith("could not reach glm")

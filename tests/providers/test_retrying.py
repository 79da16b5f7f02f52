"""RetryingProvider around the real adapters, against the fake servers; sleeps are recorded."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pressloop.contracts import Message, Role
from pressloop.errors import ProviderError
from pressloop.providers.anthropic_messages import AnthropicMessagesProvider
from pressloop.providers.base import ModelRequest, Provider, ResponseDone, StreamPart, TextDelta
from pressloop.providers.openai_chat import OpenAIChatProvider
from pressloop.providers.retrying import RetryingProvider
from tests.wire.anthropic_server import FakeAnthropicServer
from tests.wire.openai_server import FakeOpenAIServer
from tests.wire.scripted_server import ErrorReply, Reply

REQUEST = ModelRequest(system="S", messages=[Message(role=Role.USER, content="Hi")])


class Sleeps:
    """The injected sleep: records what was asked for, returns at once."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def sequence(*values: float) -> Iterator[float]:
    yield from values


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


def retrying(
    inner: Provider, sleeps: Sleeps, *, max_retries: int = 3, rand: float = 1.0
) -> RetryingProvider:
    return RetryingProvider(
        inner, max_retries=max_retries, base_s=0.5, cap_s=1.5, sleep=sleeps, rand=lambda: rand
    )


async def test_a_429_then_success(
    openai_provider: OpenAIChatProvider, openai_server: FakeOpenAIServer, sleeps: Sleeps
) -> None:
    openai_server.push(
        ErrorReply(status=429, message="Rate limit reached", headers={"retry-after": "1"}),
        Reply(text="Fine now."),
    )
    provider = retrying(openai_provider, sleeps, rand=0.5)

    response = await provider.complete(REQUEST)

    assert response.text == "Fine now."
    assert len(openai_server.requests) == 2
    assert sleeps.delays == [0.25]  # rand() * min(cap, base * 2**0)


async def test_server_errors_until_the_retries_are_spent(
    openai_provider: OpenAIChatProvider, openai_server: FakeOpenAIServer, sleeps: Sleeps
) -> None:
    openai_server.push(*[ErrorReply(status=500, message="The server had an error")] * 4)
    provider = retrying(openai_provider, sleeps, max_retries=3)

    with pytest.raises(ProviderError) as caught:
        await provider.complete(REQUEST)

    assert caught.value.retryable is True
    assert caught.value.message == (
        "openai answered 500: The server had an error (gave up after 4 attempts)"
    )
    assert len(openai_server.requests) == 4
    assert sleeps.delays == [0.5, 1.0, 1.5]  # exponential, then capped at 1.5


async def test_full_jitter_scales_each_step(
    openai_provider: OpenAIChatProvider, openai_server: FakeOpenAIServer, sleeps: Sleeps
) -> None:
    openai_server.push(*[ErrorReply(status=503, message="busy")] * 3, Reply(text="ok"))
    draws = sequence(0.1, 0.5, 0.9)
    provider = RetryingProvider(
        openai_provider,
        max_retries=5,
        base_s=1.0,
        cap_s=60.0,
        sleep=sleeps,
        rand=lambda: next(draws),
    )

    assert (await provider.complete(REQUEST)).text == "ok"
    assert sleeps.delays == pytest.approx([0.1, 1.0, 3.6])


async def test_a_401_fails_at_once(
    openai_provider: OpenAIChatProvider, openai_server: FakeOpenAIServer, sleeps: Sleeps
) -> None:
    openai_server.push(ErrorReply(status=401, message="Incorrect API key provided"))
    provider = retrying(openai_provider, sleeps)

    with pytest.raises(ProviderError) as caught:
        await provider.complete(REQUEST)

    assert caught.value.retryable is False
    assert caught.value.message == "openai answered 401: Incorrect API key provided"
    assert len(openai_server.requests) == 1
    assert sleeps.delays == []


async def test_no_retries_means_one_attempt(
    openai_provider: OpenAIChatProvider, openai_server: FakeOpenAIServer, sleeps: Sleeps
) -> None:
    openai_server.push(ErrorReply(status=503, message="busy"))
    provider = retrying(openai_provider, sleeps, max_retries=0)

    with pytest.raises(ProviderError) as caught:
        await provider.complete(REQUEST)

    assert caught.value.message == "openai answered 503: busy (gave up after 1 attempt)"
    assert sleeps.delays == []


async def test_a_timeout_is_retried(openai_server: FakeOpenAIServer, sleeps: Sleeps) -> None:
    openai_server.push(Reply(text="late", delay_s=5), Reply(text="on time"))
    inner = OpenAIChatProvider(
        api_key="k", model="gpt-test", base_url=openai_server.base_url, timeout_s=0.2
    )
    provider = retrying(inner, sleeps)

    response = await provider.complete(REQUEST)
    await provider.aclose()

    assert response.text == "on time"
    assert len(sleeps.delays) == 1


async def test_a_stream_is_retried_when_it_fails_before_any_text(
    openai_provider: OpenAIChatProvider, openai_server: FakeOpenAIServer, sleeps: Sleeps
) -> None:
    openai_server.push(ErrorReply(status=502, message="Bad gateway"), Reply(text="Hello"))
    provider = retrying(openai_provider, sleeps)

    parts = [part async for part in provider.stream(REQUEST)]

    assert "".join(p.text for p in parts if isinstance(p, TextDelta)) == "Hello"
    assert isinstance(parts[-1], ResponseDone)
    assert parts[-1].response.text == "Hello"
    assert len(openai_server.requests) == 2
    assert sleeps.delays == [0.5]


async def test_a_stream_that_failed_after_text_is_not_retried(
    openai_provider: OpenAIChatProvider, openai_server: FakeOpenAIServer, sleeps: Sleeps
) -> None:
    openai_server.push(
        Reply(text="Half an ans", stream_error=ErrorReply(status=500, message="cut")),
    )
    provider = retrying(openai_provider, sleeps)
    seen: list[StreamPart] = []

    with pytest.raises(ProviderError) as caught:
        async for part in provider.stream(REQUEST):
            seen.append(part)

    assert "".join(p.text for p in seen if isinstance(p, TextDelta)) == "Half an ans"
    assert caught.value.retryable is True  # retryable, yet raised: text was already shown
    assert "(gave up" not in caught.value.message
    assert len(openai_server.requests) == 1
    assert sleeps.delays == []


async def test_anthropic_overload_then_success_streamed(
    anthropic_server: FakeAnthropicServer, sleeps: Sleeps
) -> None:
    anthropic_server.push(
        ErrorReply(status=529, message="Overloaded"),
        ErrorReply(status=529, message="Overloaded"),
        Reply(text="Here you go."),
    )
    inner = AnthropicMessagesProvider(
        api_key="k", model="claude-test", base_url=anthropic_server.base_url, timeout_s=5
    )
    provider = retrying(inner, sleeps)

    parts = [part async for part in provider.stream(REQUEST)]
    await provider.aclose()

    assert isinstance(parts[-1], ResponseDone)
    assert parts[-1].response.text == "Here you go."
    assert sleeps.delays == [0.5, 1.0]
    assert len(anthropic_server.requests) == 3


async def test_it_presents_the_inner_provider(
    openai_provider: OpenAIChatProvider, sleeps: Sleeps
) -> None:
    provider = retrying(openai_provider, sleeps)

    assert isinstance(provider, Provider)
    assert (provider.name, provider.model, provider.supports_tools) == ("openai", "gpt-test", True)
    assert provider.inner is openai_provider

"""build_provider: which provider, model, key and base URL the settings give."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pressloop.config import Settings
from pressloop.contracts import Message, Role
from pressloop.errors import ConfigurationError, ProviderError, ProviderNotConfigured
from pressloop.providers.anthropic_messages import AnthropicMessagesProvider
from pressloop.providers.base import ModelRequest, Provider
from pressloop.providers.factory import build_provider, relays_streams
from pressloop.providers.openai_chat import OpenAIChatProvider
from pressloop.providers.retrying import RetryingProvider
from pressloop.providers.tool_names import NativeToolNames
from tests.support.processes import ISOLATED
from tests.wire.anthropic_server import FakeAnthropicServer
from tests.wire.openai_server import FakeOpenAIServer
from tests.wire.scripted_server import ErrorReply, Reply

REQUEST = ModelRequest(system="S", messages=[Message(role=Role.USER, content="Hi")])

ENVIRONMENT = [
    *ISOLATED,
    "PRESSLOOP_PROVIDER",
    "PRESSLOOP_MODEL",
    "PRESSLOOP_BASE_URL",
    "PRESSLOOP_SCRIPT",
    "PRESSLOOP_PROVIDER_RETRIES",
]


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)


def settings(**values: Any) -> Settings:
    """Settings from the (cleaned) environment and `values`, never from a .env file."""
    return Settings(_env_file=None, **values)


async def noop_sleep(seconds: float) -> None:
    return None


def unwrap(provider: Provider) -> Provider:
    assert isinstance(provider, RetryingProvider)
    assert isinstance(provider.inner, NativeToolNames)
    return provider.inner.inner


def test_nothing_configured_says_what_to_set() -> None:
    with pytest.raises(ProviderNotConfigured) as caught:
        build_provider(settings())

    message = caught.value.message
    assert message.startswith("No model provider is configured.")
    for needed in ("PRESSLOOP_PROVIDER", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        assert needed in message


@pytest.mark.parametrize(
    ("values", "variable", "relayed"),
    [
        ({}, None, False),  # none configured: `pressloop serve` starts, each turn says so
        ({}, "OPENAI_API_KEY", True),
        ({}, "ZAI_API_KEY", True),
        ({}, "ANTHROPIC_API_KEY", False),  # Anthropic's protocol is not Chat Completions
        ({"provider": "openai-compatible", "base_url": "http://127.0.0.1:9/v1"}, None, True),
        ({"provider": "local"}, None, False),
        ({"provider": "scripted"}, None, False),
    ],
)
def test_only_a_chat_completions_provider_is_read_by_a_stream_process(
    monkeypatch: pytest.MonkeyPatch, values: dict[str, str], variable: str | None, relayed: bool
) -> None:
    if variable is not None:
        monkeypatch.setenv(variable, "the-key")
    assert relays_streams(settings(**values)) is relayed


@pytest.mark.parametrize(
    ("variable", "name", "kind", "model", "base_url"),
    [
        ("OPENAI_API_KEY", "openai", OpenAIChatProvider, "gpt-5.2", "https://api.openai.com/v1"),
        (
            "ANTHROPIC_API_KEY",
            "anthropic",
            AnthropicMessagesProvider,
            "claude-3-5-sonnet-latest",
            "https://api.anthropic.com",
        ),
        (
            "OPENROUTER_API_KEY",
            "openrouter",
            OpenAIChatProvider,
            "anthropic/claude-sonnet-4-5",
            "https://openrouter.ai/api/v1",
        ),
        ("ZAI_API_KEY", "glm", OpenAIChatProvider, "glm-5", "https://api.z.ai/api/paas/v4"),
    ],
)
def test_a_key_in_the_environment_picks_the_provider(
    monkeypatch: pytest.MonkeyPatch,
    variable: str,
    name: str,
    kind: type,
    model: str,
    base_url: str,
) -> None:
    monkeypatch.setenv(variable, "the-key")

    provider = build_provider(settings())

    inner = unwrap(provider)
    assert isinstance(inner, kind)
    assert (provider.name, provider.model) == (name, model)
    assert inner.base_url == base_url  # type: ignore[attr-defined]


def test_detection_order_prefers_openai_then_anthropic(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZAI_API_KEY", "z")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "a")
    assert build_provider(settings()).name == "anthropic"
    monkeypatch.setenv("OPENAI_API_KEY", "o")
    assert build_provider(settings()).name == "openai"


@pytest.mark.parametrize(
    ("provider", "variable"),
    [
        ("openai", "OPENAI_API_KEY"),
        ("anthropic", "ANTHROPIC_API_KEY"),
        ("openrouter", "OPENROUTER_API_KEY"),
        ("glm", "ZAI_API_KEY"),
    ],
)
def test_a_chosen_provider_without_its_key(
    monkeypatch: pytest.MonkeyPatch, provider: str, variable: str
) -> None:
    monkeypatch.setenv("PRESSLOOP_PROVIDER", provider)
    monkeypatch.setenv("OPENAI_API_KEY" if provider != "openai" else "ZAI_API_KEY", "other")

    with pytest.raises(ProviderNotConfigured) as caught:
        build_provider(settings())

    assert variable in caught.value.message
    assert provider in caught.value.message


def test_model_and_base_url_precedence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://proxy.internal/v1")
    monkeypatch.setenv("PRESSLOOP_MODEL", "gpt-5-mini")
    provider = build_provider(settings())
    assert provider.model == "gpt-5-mini"
    assert unwrap(provider).base_url == "http://proxy.internal/v1"  # type: ignore[attr-defined]

    monkeypatch.setenv("PRESSLOOP_BASE_URL", "http://gateway.internal/v1")
    provider = build_provider(settings())
    assert unwrap(provider).base_url == "http://gateway.internal/v1"  # type: ignore[attr-defined]

    # A provider's own base URL variable is not borrowed by another provider.
    monkeypatch.delenv("PRESSLOOP_BASE_URL")
    monkeypatch.setenv("PRESSLOOP_PROVIDER", "glm")
    monkeypatch.setenv("ZAI_API_KEY", "z")
    provider = build_provider(settings())
    assert unwrap(provider).base_url == "https://api.z.ai/api/paas/v4"  # type: ignore[attr-defined]


def test_openai_compatible_needs_a_base_url() -> None:
    with pytest.raises(ConfigurationError) as caught:
        build_provider(settings(provider="openai-compatible"))

    assert "PRESSLOOP_BASE_URL" in caught.value.message


async def test_openai_compatible_on_the_wire_with_no_key(
    monkeypatch: pytest.MonkeyPatch, openai_server: FakeOpenAIServer
) -> None:
    monkeypatch.setenv("PRESSLOOP_PROVIDER", "openai-compatible")
    monkeypatch.setenv("PRESSLOOP_BASE_URL", openai_server.base_url)
    monkeypatch.setenv("PRESSLOOP_MODEL", "qwen2.5-7b-instruct")
    openai_server.push(Reply(text="Local hello."))
    provider = build_provider(settings())

    response = await provider.complete(REQUEST)
    assert isinstance(provider, RetryingProvider)
    await provider.aclose()

    assert response.text == "Local hello."
    assert provider.name == "openai-compatible"
    (request,) = openai_server.requests
    assert request.headers["authorization"] == "Bearer not-needed"
    assert request.body["model"] == "qwen2.5-7b-instruct"


async def test_retry_settings_reach_the_wrapper(
    monkeypatch: pytest.MonkeyPatch, anthropic_server: FakeAnthropicServer
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", anthropic_server.base_url)
    monkeypatch.setenv("PRESSLOOP_PROVIDER_RETRIES", "1")
    anthropic_server.push(*[ErrorReply(status=529, message="Overloaded")] * 2)
    delays: list[float] = []

    async def sleep(seconds: float) -> None:
        delays.append(seconds)

    provider = build_provider(settings(provider_retry_base_s=0.01), sleep=sleep)
    with pytest.raises(ProviderError) as caught:
        await provider.complete(REQUEST)
    assert isinstance(provider, RetryingProvider)
    await provider.aclose()

    assert caught.value.retryable is True
    assert "gave up after 2 attempts" in caught.value.message
    assert len(anthropic_server.requests) == 2
    assert len(delays) == 1
    assert 0 <= delays[0] <= 0.01


async def test_scripted_reads_its_script(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "Scripted hello."}]), encoding="utf-8")

    provider = build_provider(settings(provider="scripted", script=script), sleep=noop_sleep)

    assert not isinstance(provider, RetryingProvider)
    assert provider.name == "scripted"
    assert (await provider.complete(REQUEST)).text == "Scripted hello."


def test_scripted_without_a_script_says_so() -> None:
    with pytest.raises(ConfigurationError) as caught:
        build_provider(settings(provider="scripted"))

    assert "PRESSLOOP_SCRIPT" in caught.value.message


def test_an_openai_compatible_provider_does_not_import_the_anthropic_sdk() -> None:
    # A first turn pays every import its provider makes: the other SDK must not be one of them.
    code = (
        "import sys\n"
        "from pressloop.providers.openai_chat import OpenAIChatProvider\n"
        "OpenAIChatProvider(api_key='k', model='m', timeout_s=5)\n"
        "print('anthropic' in sys.modules, 'openai' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["False", "True"]

"""Build the configured model provider from `Settings` (DESIGN.md section 10)."""

from __future__ import annotations

from dataclasses import dataclass

from pressloop.clock import Sleep, real_sleep
from pressloop.config import DEFAULT_BASE_URLS, DEFAULT_MODELS, Settings
from pressloop.errors import ConfigurationError, ProviderNotConfigured
from pressloop.providers.base import Provider
from pressloop.providers.retrying import RetryingProvider
from pressloop.providers.tool_names import NativeToolNames

# Auto-detection order when PRESSLOOP_PROVIDER is not set: the first key found wins.
_KEY_VARIABLES: dict[str, str] = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
    "glm": "ZAI_API_KEY",
}

NOT_CONFIGURED = (
    "No model provider is configured. Set PRESSLOOP_PROVIDER (openai, anthropic, openrouter, "
    "glm, openai-compatible, local, scripted) and its key, e.g. OPENAI_API_KEY=... or "
    "ANTHROPIC_API_KEY=..."
)

# OpenRouter shows this name for our requests on its dashboards.
_OPENROUTER_HEADERS = {"X-Title": "Pressloop"}


def build_provider(settings: Settings, *, sleep: Sleep = real_sleep) -> Provider:
    """The provider `settings` ask for, wrapped in retries when it talks to a real API."""
    name = settings.provider or _detect(settings)
    if name == "scripted":
        # Imported here: the scripted provider is for demos and tests, not every deployment.
        from pressloop.providers.scripted import ScriptedProvider

        return ScriptedProvider.from_file(
            settings.script, model=settings.model or DEFAULT_MODELS["scripted"], sleep=sleep
        )
    if name == "local":
        # Imported here: llama.cpp comes from the optional `local` group, and nothing to retry:
        # an in-process model has no network between us and it.
        from pressloop.providers.local import build_local_provider

        return build_local_provider(settings)
    return RetryingProvider(
        NativeToolNames(_real_provider(name, settings)),
        max_retries=settings.provider_max_retries,
        base_s=settings.provider_retry_base_s,
        cap_s=settings.provider_retry_cap_s,
        sleep=sleep,
    )


def relays_streams(settings: Settings) -> bool:
    """The configured provider speaks Chat Completions over HTTP, the one protocol the stream
    process reads (`pressloop/streamer/relay.py`). None configured: nothing to read."""
    name = _configured(settings)
    return name is not None and name not in ("scripted", "local", "anthropic")


def load_sdk(settings: Settings) -> None:
    """Import the configured provider's SDK now, without building the provider (no client, no
    network): `pressloop serve` and `pressloop worker` at start. An import takes about a second
    of the event loop, better before serving than in the first person's turn, and what it loads
    is then frozen with the rest of start-up (`runtime/collector.py`). A provider that is not
    configured loads nothing: every turn reports it until it is."""
    name = _configured(settings)
    if name == "anthropic":
        import pressloop.providers.anthropic_messages  # noqa: F401
    elif name not in (None, "scripted", "local"):  # none of these uses a model SDK
        import pressloop.providers.openai_chat  # noqa: F401


def _configured(settings: Settings) -> str | None:
    """The provider's name, None when none is configured (each turn then says so)."""
    try:
        return settings.provider or _detect(settings)
    except ProviderNotConfigured:
        return None


def _detect(settings: Settings) -> str:
    for name in _KEY_VARIABLES:
        if _key(name, settings):
            return name
    raise ProviderNotConfigured(NOT_CONFIGURED)


def _key(name: str, settings: Settings) -> str | None:
    return {
        "openai": settings.openai_api_key,
        "anthropic": settings.anthropic_api_key,
        "openrouter": settings.openrouter_api_key,
        "glm": settings.zai_api_key,
    }.get(name)


def _required_key(name: str, settings: Settings) -> str:
    key = _key(name, settings)
    if not key:
        raise ProviderNotConfigured(
            f"PRESSLOOP_PROVIDER={name} needs an API key: set {_KEY_VARIABLES[name]}"
        )
    return key


def _base_url(name: str, settings: Settings) -> str | None:
    """PRESSLOOP_BASE_URL, then the provider's own variable, then our default (or the SDK's)."""
    own = {
        "openai": settings.openai_base_url,
        "openai-compatible": settings.openai_base_url,
        "anthropic": settings.anthropic_base_url,
    }.get(name)
    return settings.base_url or own or DEFAULT_BASE_URLS.get(name)


@dataclass(kw_only=True, frozen=True)
class Endpoint:
    """Where a provider's calls go over the network, with which key, and which settings say so
    (what `pressloop doctor` checks and names)."""

    name: str
    base_url: str
    base_url_variable: str  # the setting that gave `base_url`, or the one to set to change it
    default_base_url: bool  # no setting gave it
    api_key: str | None
    key_variable: str


def endpoint(settings: Settings) -> Endpoint | None:
    """The configured provider's endpoint, or None when no network is involved (`scripted`,
    `local`). Raises the `ConfigurationError`s `build_provider` raises."""
    name = settings.provider or _detect(settings)
    if name in ("scripted", "local"):
        return None
    own = {
        "openai": ("OPENAI_BASE_URL", settings.openai_base_url),
        "openai-compatible": ("OPENAI_BASE_URL", settings.openai_base_url),
        "anthropic": ("ANTHROPIC_BASE_URL", settings.anthropic_base_url),
    }.get(name, ("PRESSLOOP_BASE_URL", None))
    base_url = _base_url(name, settings) or _sdk_base_url(name)
    key = settings.openai_api_key if name == "openai-compatible" else _required_key(name, settings)
    return Endpoint(
        name=name,
        base_url=base_url.rstrip("/"),
        base_url_variable="PRESSLOOP_BASE_URL" if settings.base_url else own[0],
        default_base_url=not (settings.base_url or own[1]),
        api_key=key,
        key_variable=_KEY_VARIABLES.get(name, "OPENAI_API_KEY"),
    )


def _sdk_base_url(name: str) -> str:
    if name == "anthropic":
        from pressloop.providers.anthropic_messages import ANTHROPIC_BASE_URL

        return ANTHROPIC_BASE_URL
    from pressloop.providers.openai_chat import OPENAI_BASE_URL

    return OPENAI_BASE_URL


def _real_provider(name: str, settings: Settings) -> Provider:
    # The SDKs take seconds to import (and block the event loop meanwhile): only the one in use
    # is loaded.
    model = settings.model or DEFAULT_MODELS[name]
    timeout_s = settings.provider_timeout_s
    base_url = _base_url(name, settings)
    if name == "anthropic":
        from pressloop.providers.anthropic_messages import AnthropicMessagesProvider

        key = _required_key(name, settings)
        return AnthropicMessagesProvider(
            api_key=key,
            model=model,
            base_url=base_url,
            timeout_s=timeout_s,
            max_connections=settings.provider_max_connections,
        )
    from pressloop.providers.openai_chat import OpenAIChatProvider

    if name == "openai-compatible":
        if not base_url:
            raise ConfigurationError(
                "PRESSLOOP_PROVIDER=openai-compatible needs the server's URL: set "
                "PRESSLOOP_BASE_URL (e.g. http://127.0.0.1:8000/v1)"
            )
        # Local servers usually need no key; the SDK insists on a non-empty one.
        key = settings.openai_api_key or "not-needed"
    else:
        key = _required_key(name, settings)
    return OpenAIChatProvider(
        api_key=key,
        model=model,
        base_url=base_url,
        timeout_s=timeout_s,
        name=name,
        extra_headers=_OPENROUTER_HEADERS if name == "openrouter" else None,
        max_connections=settings.provider_max_connections,
    )

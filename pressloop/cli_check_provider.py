"""`pressloop doctor`'s check of the model provider: one cheap authenticated request, with a short
timeout, to where the provider's calls go.

OpenAI-shaped providers answer `GET {base}/models` (OpenRouter lists its models to anyone, so
there it is `GET {base}/key`, which needs the key); Anthropic answers `GET {base}/v1/models` with
the `x-api-key` and `anthropic-version` headers. A refused key names its variable, an address
that does not answer names the base URL's, and a base URL that doubles or misses `/v1` is
reported with the fix: the Anthropic SDK adds `/v1/messages` itself, the OpenAI SDK adds only
`/chat/completions`.
"""

from __future__ import annotations

import httpx

from pressloop.cli_checks import Check
from pressloop.config import Settings
from pressloop.errors import ConfigurationError
from pressloop.providers.factory import Endpoint, endpoint

ANTHROPIC_VERSION = "2023-06-01"
_KEY_ROUTES = {"openrouter": "/key"}  # where the provider checks the key, when not /models


async def provider_check(settings: Settings, *, label: str) -> Check:
    """`label` names the provider and its model ("openai, model gpt-5.2")."""
    try:
        where = endpoint(settings)
    except ConfigurationError as exc:
        return Check(name="model provider", outcome="fail", detail=exc.message)
    if where is None:  # scripted, local: nothing on the network to check
        return Check(name="model provider", outcome="ok", detail=label)
    if where.name == "anthropic" and where.base_url.endswith("/v1"):
        return _fail(
            f"{label}: {where.base_url_variable}={where.base_url} ends in /v1, and the SDK adds "
            f"/v1/messages itself: every call would go to {where.base_url}/v1/messages",
            f"set {where.base_url_variable}={where.base_url.removesuffix('/v1')}",
        )
    async with httpx.AsyncClient(timeout=settings.check_timeout_s) as http:
        return await _probe(http, where, label, settings.check_timeout_s)


def _fail(detail: str, hint: str) -> Check:
    return Check(name="model provider", outcome="fail", detail=detail, hint=hint)


def _route(where: Endpoint) -> str:
    if where.name == "anthropic":
        return where.base_url + "/v1/models"
    return where.base_url + _KEY_ROUTES.get(where.name, "/models")


def _headers(where: Endpoint) -> dict[str, str]:
    if where.name == "anthropic":
        return {"x-api-key": where.api_key or "", "anthropic-version": ANTHROPIC_VERSION}
    # With no key, what the provider sends an OpenAI-compatible server too (factory.py).
    return {"Authorization": f"Bearer {where.api_key or 'not-needed'}"}


async def _probe(http: httpx.AsyncClient, where: Endpoint, label: str, timeout_s: float) -> Check:
    url = _route(where)
    address = f"{where.base_url_variable}={where.base_url}" + (
        " (the default)" if where.default_base_url else ""
    )
    try:
        response = await http.get(url, headers=_headers(where))
    except httpx.TimeoutException:
        return _fail(
            f"{label}: no answer from {url} within {timeout_s:g} s",
            f"check {address} and that the server is up (or the network on the way to it)",
        )
    except httpx.HTTPError as exc:
        return _fail(
            f"{label}: could not reach {where.base_url}: {str(exc) or type(exc).__name__}",
            f"check {address} and that the server is running",
        )
    status = response.status_code
    if response.is_success:
        key = "the key is accepted" if where.api_key else "no key sent"
        return Check(
            name="model provider", outcome="ok", detail=f"{label}: {where.base_url} answers, {key}"
        )
    said = f"{status} {_said(response)}".strip()
    if status in (401, 403):
        return _fail(
            f"{label}: {where.base_url} refused the key ({said}; GET {url})",
            f"set {where.key_variable} to a valid key"
            + (" for this account" if status == 403 else "")
            + ("" if where.api_key else ": the server wants one"),
        )
    if await _misses_v1(http, where, status):
        return _fail(
            f"{label}: {where.base_url}/models is not found (404) but {where.base_url}"
            f"/v1/models answers: every call would go to {where.base_url}/chat/completions, "
            "a path the server does not serve",
            f"set {where.base_url_variable}={where.base_url}/v1",
        )
    return Check(
        name="model provider",
        outcome="warn",
        detail=f"{label}: GET {url} answered {said}; the key and address are not confirmed",
        hint=f"check {address} and {where.key_variable}"
        + ("; it may be busy or rate limiting: try again" if status in (429, 529) else ""),
    )


async def _misses_v1(http: httpx.AsyncClient, where: Endpoint, status: int) -> bool:
    """An OpenAI-shaped base URL without its /v1: 404 at {base}/models, 200 at {base}/v1/models."""
    if status != 404 or where.name == "anthropic" or where.base_url.endswith("/v1"):
        return False
    try:
        return (await http.get(where.base_url + "/v1/models", headers=_headers(where))).is_success
    except httpx.HTTPError:
        return False


def _said(response: httpx.Response, limit: int = 200) -> str:
    """The provider's error message (`{"error": {"message"}}` for both shapes), or the body."""
    try:
        body = response.json()
    except ValueError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        text = error["message"]
    elif isinstance(error, str):
        text = error
    else:
        text = response.text
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."

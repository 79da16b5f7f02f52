"""`pressloop doctor` checks the model provider for real: one authenticated request to the wire-
level fake OpenAI and Anthropic servers, or to a closed port, and the line names what to fix."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.cli.conftest import Pressloop, Result
from tests.wire.anthropic_server import FakeAnthropicServer
from tests.wire.fixtures import (  # noqa: F401
    anthropic_server,
    anthropic_server_session,
    openai_server,
    openai_server_session,
)
from tests.wire.openai_server import FakeOpenAIServer
from tests.wire.scripted_server import ErrorReply, Reply


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def no_model_cache(tmp_path: Path) -> dict[str, str]:
    """An empty model cache: doctor's local model line stays a quick "info" (no model loads)."""
    return {"PRESSLOOP_MODEL_CACHE": str(tmp_path / "model-cache"), "COLUMNS": "400"}


async def doctor(pressloop: Pressloop, env: dict[str, str]) -> Result:
    return await pressloop("doctor", env=env)


def line(result: Result, name: str) -> tuple[str, str]:
    """The check's line (`fail  model provider: ...`) and its hint ("" when none)."""
    lines = result.out.splitlines()
    at = next((i for i, x in enumerate(lines) if f" {name}: " in x), None)
    assert at is not None, result.out + result.err
    hint = lines[at + 1].strip() if at + 1 < len(lines) and "hint:" in lines[at + 1] else ""
    return lines[at].strip(), hint


def openai_env(base_url: str) -> dict[str, str]:
    return {
        "PRESSLOOP_PROVIDER": "openai",
        "OPENAI_API_KEY": "sk-test",
        "OPENAI_BASE_URL": base_url,
    }


def anthropic_env(base_url: str) -> dict[str, str]:
    return {
        "PRESSLOOP_PROVIDER": "anthropic",
        "ANTHROPIC_API_KEY": "sk-ant-test",
        "ANTHROPIC_BASE_URL": base_url,
    }


async def test_openai_key_accepted_then_refused(
    pressloop: Pressloop,
    openai_server: FakeOpenAIServer,  # noqa: F811
    no_model_cache: dict[str, str],
) -> None:
    env = {**no_model_cache, **openai_env(openai_server.base_url)}
    openai_server.push(Reply(model="gpt-5.2"))
    ok, _ = line(await doctor(pressloop, env), "model provider")
    assert ok.startswith("ok"), ok
    assert f"openai, model gpt-5.2: {openai_server.base_url} answers, the key is accepted" in ok
    (request,) = openai_server.requests
    assert request.method == "GET" and request.path == "/v1/models"
    assert request.headers["authorization"] == "Bearer sk-test"

    openai_server.push(ErrorReply(status=401, message="Incorrect API key provided: sk-test."))
    refused, hint = line(await doctor(pressloop, env), "model provider")
    assert refused.startswith("fail"), refused
    assert "refused the key (401 Incorrect API key provided: sk-test." in refused
    assert "set OPENAI_API_KEY to a valid key" in hint


async def test_an_unreachable_base_url_names_its_variable(
    pressloop: Pressloop, no_model_cache: dict[str, str]
) -> None:
    closed = f"http://127.0.0.1:{closed_port()}"
    openai = await doctor(pressloop, {**no_model_cache, **openai_env(closed + "/v1")})
    fail, hint = line(openai, "model provider")
    assert openai.code == 1
    assert fail.startswith("fail") and f"could not reach {closed}/v1" in fail, fail
    assert f"check OPENAI_BASE_URL={closed}/v1 and that the server is running" in hint

    anthropic = await doctor(
        pressloop, {**no_model_cache, **anthropic_env(closed), "PRESSLOOP_BASE_URL": closed}
    )
    fail, hint = line(anthropic, "model provider")
    assert fail.startswith("fail") and f"could not reach {closed}" in fail, fail
    assert f"check PRESSLOOP_BASE_URL={closed}" in hint  # it wins over ANTHROPIC_BASE_URL


async def test_anthropic_key_accepted_then_refused(
    pressloop: Pressloop,
    anthropic_server: FakeAnthropicServer,  # noqa: F811
    no_model_cache: dict[str, str],
) -> None:
    env = {**no_model_cache, **anthropic_env(anthropic_server.base_url)}
    anthropic_server.push(Reply(model="claude-3-5-sonnet-20241022"))
    ok, _ = line(await doctor(pressloop, env), "model provider")
    assert ok.startswith("ok") and "the key is accepted" in ok, ok
    (request,) = anthropic_server.requests
    assert request.method == "GET" and request.path == "/v1/models"
    assert request.headers["x-api-key"] == "sk-ant-test"
    assert request.headers["anthropic-version"] == "2023-06-01"

    anthropic_server.push(ErrorReply(status=401, message="invalid x-api-key"))
    refused, hint = line(await doctor(pressloop, env), "model provider")
    assert refused.startswith("fail") and "refused the key (401 invalid x-api-key" in refused
    assert "set ANTHROPIC_API_KEY to a valid key" in hint


async def test_an_anthropic_base_url_ending_in_v1_is_reported_with_the_fix(
    pressloop: Pressloop,
    anthropic_server: FakeAnthropicServer,  # noqa: F811
    no_model_cache: dict[str, str],
) -> None:
    origin = anthropic_server.base_url
    result = await doctor(pressloop, {**no_model_cache, **anthropic_env(origin + "/v1/")})
    fail, hint = line(result, "model provider")
    assert result.code == 1
    assert fail.startswith("fail"), fail
    assert f"ANTHROPIC_BASE_URL={origin}/v1 ends in /v1" in fail
    assert f"every call would go to {origin}/v1/v1/messages" in fail
    assert hint == f"hint: set ANTHROPIC_BASE_URL={origin}"
    assert anthropic_server.requests == []


async def test_an_openai_compatible_base_url_missing_v1_is_reported_with_the_fix(
    pressloop: Pressloop,
    openai_server: FakeOpenAIServer,  # noqa: F811
    no_model_cache: dict[str, str],
) -> None:
    origin = openai_server.origin  # the server answers under /v1
    openai_server.push(Reply())  # GET {origin}/v1/models; {origin}/models is a 404
    env = {
        **no_model_cache,
        "PRESSLOOP_PROVIDER": "openai-compatible",
        "PRESSLOOP_BASE_URL": origin,
    }
    fail, hint = line(await doctor(pressloop, env), "model provider")
    assert fail.startswith("fail"), fail
    assert f"{origin}/models is not found (404) but {origin}/v1/models answers" in fail
    assert hint == f"hint: set PRESSLOOP_BASE_URL={origin}/v1"
    assert [r.path for r in openai_server.requests] == ["/v1/models"]

"""The scripted provider: in order, cycling, per turn, failures, and a clear end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pressloop.contracts import ActionCall, Message, Role
from pressloop.errors import ConfigurationError, ProviderError, ScriptExhausted
from pressloop.providers.base import ModelRequest
from pressloop.providers.scripted import ScriptedProvider


def request(*messages: Message) -> ModelRequest:
    return ModelRequest(system="s", messages=list(messages))


USER = Message(role=Role.USER, content="hi")
CALLED = Message(role=Role.ASSISTANT, tool_calls=[ActionCall(id="c", name="noop")])
RESULT = Message(role=Role.TOOL, tool_call_id="c", content="ok")


async def test_answers_in_order_then_says_it_is_used_up() -> None:
    provider = ScriptedProvider([{"text": "one"}, {"text": "two"}])
    assert (await provider.complete(request(USER))).text == "one"
    assert (await provider.complete(request(USER))).text == "two"
    with pytest.raises(ScriptExhausted, match="used all 2 answers"):
        await provider.complete(request(USER))


async def test_per_turn_scripts_answer_each_turn_from_the_start(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text(
        json.dumps(
            {
                "per_turn": True,
                "answers": [
                    {"tool_calls": [{"name": "noop", "arguments": {}}]},
                    {"text": "done"},
                ],
            }
        )
    )
    provider = ScriptedProvider.from_file(path)
    # Two turns interleaved: each gets the script's first answer, then its second.
    assert (await provider.complete(request(USER))).tool_calls[0].name == "noop"
    assert (await provider.complete(request(USER))).tool_calls[0].name == "noop"
    assert (await provider.complete(request(USER, CALLED, RESULT))).text == "done"
    assert (await provider.complete(request(USER, CALLED, RESULT, USER))).tool_calls
    assert provider.requests == []  # a load test's provider keeps nothing


async def test_scripted_failures_are_provider_errors() -> None:
    provider = ScriptedProvider(
        [
            {"error": {"status": 503, "message": "busy"}},
            {"error": {"status": 400, "message": "bad"}},
        ]
    )
    with pytest.raises(ProviderError) as busy:
        await provider.complete(request(USER))
    assert busy.value.retryable
    with pytest.raises(ProviderError) as bad:
        await provider.complete(request(USER))
    assert not bad.value.retryable


def test_a_bad_script_file_is_a_clear_configuration_error(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text('{"answers": "nope"}')
    with pytest.raises(ConfigurationError, match="must be a JSON list"):
        ScriptedProvider.from_file(path)
    with pytest.raises(ConfigurationError, match="PRESSLOOP_SCRIPT"):
        ScriptedProvider.from_file(None)

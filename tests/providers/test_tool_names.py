"""Action names the APIs refuse as tool names (`server.tool`, from MCP) go out in their alphabet
and come back as the action's name, on the wire of both APIs (the fake servers apply the APIs'
rule: ^[a-zA-Z0-9_-]{1,64}$ for OpenAI, 128 for Anthropic)."""

from __future__ import annotations

import pytest

from pressloop.config import Settings
from pressloop.contracts import ActionCall, Message, Role
from pressloop.providers.base import ModelRequest, ResponseDone, ToolSpec
from pressloop.providers.factory import build_provider
from pressloop.providers.tool_names import ToolNameMap, wire_name
from tests.wire.anthropic_server import FakeAnthropicServer
from tests.wire.openai_server import FakeOpenAIServer
from tests.wire.scripted_server import Reply, ToolCall

ECHO = "everything.echo"
LONG = "a-server-with-a-long-name." + "tool_" * 20


def request() -> ModelRequest:
    tools = [
        ToolSpec(name=name, description="d", parameters={"type": "object"})
        for name in (ECHO, "everything__echo", LONG, "list_posts")
    ]
    history = [
        Message(role=Role.USER, content="Echo hi"),
        Message(role=Role.ASSISTANT, tool_calls=[ActionCall(id="c1", name=ECHO, params={})]),
        Message(role=Role.TOOL, tool_call_id="c1", name=ECHO, content="hi"),
    ]
    return ModelRequest(system="S", messages=history, tools=tools)


def test_names_are_one_to_one_and_valid() -> None:
    names = ToolNameMap.of(request())
    assert names.out["list_posts"] == "list_posts"  # a valid name is left as it is
    assert names.out[ECHO] == "everything__echo"
    assert names.out["everything__echo"] != names.out[ECHO]  # told apart by a suffix
    assert len(names.out[LONG]) == 64 and wire_name(LONG) == wire_name(LONG)
    assert len(set(names.out.values())) == len(names.out)
    assert {names.back[wire] for wire in names.out.values()} == set(names.out)


@pytest.mark.parametrize("api", ["openai", "anthropic"])
@pytest.mark.parametrize("stream", [False, True])
async def test_the_wire_carries_valid_names_and_the_answer_the_actions_names(
    api: str,
    stream: bool,
    openai_server: FakeOpenAIServer,
    anthropic_server: FakeAnthropicServer,
) -> None:
    server = openai_server if api == "openai" else anthropic_server
    key = {"openai_api_key": "sk-t"} if api == "openai" else {"anthropic_api_key": "sk-t"}
    provider = build_provider(
        Settings(_env_file=None, provider=api, base_url=server.base_url, **key)  # type: ignore[call-arg]
    )
    server.push(Reply(tool_calls=[ToolCall(id="c2", name="everything__echo", arguments={"x": 1})]))
    try:
        if stream:
            parts = [part async for part in provider.stream(request())]
            done = parts[-1]
            assert isinstance(done, ResponseDone)
            response = done.response
        else:
            response = await provider.complete(request())
    finally:
        await provider.aclose()  # type: ignore[attr-defined]
    (sent,) = server.requests  # an invalid name would have been a 400 (ProviderError)
    tools = sent.body["tools"]
    names = [t["function"]["name"] if api == "openai" else t["name"] for t in tools]
    assert names[0] == "everything__echo" and names[3] == "list_posts"
    assert ECHO not in str(sent.body)
    assert [call.name for call in response.tool_calls] == [ECHO]
    assert response.tool_calls[0].params == {"x": 1}

"""A model's text with half a character in it, from either adapter, on the wire: an emoji's two
surrogate halves sent in two chunks (a server that cuts its stream by UTF-16 code units), a half
with no other half. The text that comes out has no lone surrogate (none has a UTF-8 encoding: the
run's text could not be stored), each pair made one character again, the rest U+FFFD, and NUL
(PostgreSQL stores none) U+FFFD too; the
deltas add up to the whole text; so are a tool call's id, name and arguments (PostgreSQL's
`jsonb` refuses a lone half too)."""

from __future__ import annotations

import pytest

from pressloop.contracts import ActionCall
from pressloop.providers.anthropic_messages import AnthropicMessagesProvider
from pressloop.providers.base import ModelResponse, ResponseDone, TextDelta
from pressloop.providers.openai_chat import OpenAIChatProvider
from tests.providers.openai_calls import CREATE_POST, ask, collect
from tests.wire.anthropic_server import FakeAnthropicServer
from tests.wire.openai_server import FakeOpenAIServer
from tests.wire.scripted_server import Reply, ToolCall

# As they come off the wire: JSON's escapes for half an emoji each ("\ud83d" "\ude00" is 😀).
PIECES = ("Hi ", "\ud83d", "\ude00", " there \udc00", "!\x00", " \ud83d")
DELTAS = ["Hi ", "😀", " there \ufffd", "!\ufffd", " "]  # the last half has nothing to complete it
WHOLE = "Hi 😀 there \ufffd!\ufffd "

Provider = OpenAIChatProvider | AnthropicMessagesProvider


@pytest.fixture(params=["openai", "anthropic"])
def adapter(
    request: pytest.FixtureRequest,
    openai_server: FakeOpenAIServer,
    anthropic_server: FakeAnthropicServer,
) -> tuple[Provider, FakeOpenAIServer | FakeAnthropicServer]:
    if request.param == "openai":
        return request.getfixturevalue("openai_provider"), openai_server
    return request.getfixturevalue("anthropic_provider"), anthropic_server


async def test_halves_of_a_character_streamed_apart_are_joined_and_lone_ones_replaced(
    adapter: tuple[Provider, FakeOpenAIServer | FakeAnthropicServer],
) -> None:
    provider, server = adapter
    server.push(Reply(text="".join(PIECES), deltas=PIECES))

    parts = await collect(provider, ask())  # type: ignore[arg-type]

    deltas = [part.text for part in parts if isinstance(part, TextDelta)]
    assert deltas == DELTAS
    done = parts[-1]
    assert isinstance(done, ResponseDone)
    assert done.response.text == WHOLE == "".join(deltas)
    assert done.response.text.encode("utf-8")  # storable


async def test_a_whole_answer_with_a_lone_half_has_it_replaced(
    adapter: tuple[Provider, FakeOpenAIServer | FakeAnthropicServer],
) -> None:
    provider, server = adapter
    server.push(Reply(text="odd \ud800 half, whole \ud83d\ude00, nul \x00"))

    response = await provider.complete(ask())

    assert isinstance(response, ModelResponse)
    assert response.text == "odd \ufffd half, whole 😀, nul \ufffd"


@pytest.mark.parametrize("way", ["complete", "stream"])
async def test_a_tool_call_with_lone_halves_has_them_replaced_everywhere(
    adapter: tuple[Provider, FakeOpenAIServer | FakeAnthropicServer], way: str
) -> None:
    # A model that copies a page's broken escapes into its call (JSON in JSON: the arguments'
    # own escapes spell the halves, and a NUL).
    provider, server = adapter
    arguments = (
        '{"title": "\\ud800 odd", "tags": ["\\udfff", "\\u0000"], '
        '"\\ud83d": {"whole": "\\ud83d\\ude00"}}'
    )
    server.push(
        Reply(
            text="",
            tool_calls=(ToolCall(id="call_\ud800", name="create_post", arguments=arguments),),
        )
    )

    if way == "complete":
        response = await provider.complete(ask(tools=[CREATE_POST]))
    else:
        parts = await collect(provider, ask(tools=[CREATE_POST]))  # type: ignore[arg-type]
        done = parts[-1]
        assert isinstance(done, ResponseDone)
        response = done.response

    assert response.tool_calls == [
        ActionCall(
            id="call_\ufffd",
            name="create_post",
            params={"title": "\ufffd odd", "tags": ["\ufffd", "\ufffd"], "\ufffd": {"whole": "😀"}},
        )
    ]

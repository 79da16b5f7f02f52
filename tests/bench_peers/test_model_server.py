"""The peers benchmark's scripted model server, spoken to through the real `openai` SDK: the
script every system follows (3 tool rounds, then the final text), streaming, the first token's
clock stamp, and the held request and probes the crash test relies on."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest

from bench.peers.model_server import (
    FINAL_WORDS,
    STAMP,
    Behaviour,
    ModelServer,
    base_url,
    tool_results,
)
from tests.bench_peers.model_script import TOOLS, transcript


@pytest.fixture
async def server() -> AsyncIterator[tuple[ModelServer, int]]:
    model = ModelServer()
    port = await model.start()
    yield model, port
    await model.close()


def read_stats(port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats", timeout=10) as response:
        stats: dict[str, Any] = json.load(response)
    return stats


def client(port: int, **behaviour: int) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(api_key="k", base_url=base_url(port, **behaviour), max_retries=0)


async def test_three_tool_rounds_then_the_final_text(server: tuple[ModelServer, int]) -> None:
    _model, port = server
    async with client(port) as sdk:
        for rounds in range(3):
            answer = await sdk.chat.completions.create(
                model="m", messages=transcript(rounds), tools=TOOLS
            )
            calls = answer.choices[0].message.tool_calls or []
            assert [c.function.name for c in calls if c.type == "function"] == ["noop"]
            assert answer.choices[0].finish_reason == "tool_calls"
        final = await sdk.chat.completions.create(model="m", messages=transcript(3), tools=TOOLS)
    text = final.choices[0].message.content or ""
    assert final.choices[0].message.tool_calls is None
    assert STAMP.match(text) and text.endswith("".join(FINAL_WORDS))


async def test_a_new_user_message_starts_the_count_again() -> None:
    messages = transcript(3) + [{"role": "assistant", "content": "done"}]
    assert tool_results(messages) == 3
    assert tool_results([*messages, {"role": "user", "content": "again"}]) == 0


async def test_streamed_tool_call_and_streamed_text(server: tuple[ModelServer, int]) -> None:
    _model, port = server
    async with client(port) as sdk:
        chunks = await sdk.chat.completions.create(
            model="m",
            messages=transcript(0),
            tools=TOOLS,
            stream=True,
            stream_options={"include_usage": True},
        )
        pieces = [chunk async for chunk in chunks]
        call_ids = [
            c.id for p in pieces for ch in p.choices for c in ch.delta.tool_calls or [] if c.id
        ]
        arguments = "".join(
            c.function.arguments or ""
            for p in pieces
            for ch in p.choices
            for c in ch.delta.tool_calls or []
            if c.function is not None
        )
        assert len(call_ids) == 1 and json.loads(arguments) == {}
        assert pieces[-1].usage is not None and pieces[-1].usage.total_tokens > 0

        chunks = await sdk.chat.completions.create(model="m", messages=transcript(3), stream=True)
        texts = [ch.delta.content async for p in chunks for ch in p.choices if ch.delta.content]
    received = time.monotonic_ns()
    stamp = STAMP.fullmatch(texts[0])
    assert stamp is not None, texts
    # The stamp is the server's CLOCK_MONOTONIC when the token left: before it arrived here.
    assert 0 < int(stamp.group(1)) <= received
    assert texts[1:] == FINAL_WORDS


async def test_the_held_request_is_never_answered_and_probes_are_counted(
    server: tuple[ModelServer, int],
) -> None:
    model, port = server
    async with client(port, hold=2) as sdk:
        for rounds in range(2):
            await sdk.chat.completions.create(
                model="m", messages=transcript(rounds, "go [probe:crash-1]"), tools=TOOLS
            )
        held = asyncio.create_task(
            sdk.chat.completions.create(
                model="m", messages=transcript(2, "go [probe:crash-1]"), tools=TOOLS
            )
        )
        for _ in range(1000):  # until the server has the request (it holds it)
            if model.stats.held:
                break
            await asyncio.sleep(0.01)
        stats = await asyncio.to_thread(read_stats, port)
        assert not held.done()
        held.cancel()
        with pytest.raises(asyncio.CancelledError):
            await held
    assert stats["held"] == 1
    assert stats["probes"] == {"crash-1": [0, 1, 2]}


def test_behaviour_from_the_path() -> None:
    assert Behaviour.parse("/m/1000_10_2/v1/chat/completions") == Behaviour(
        latency_s=1.0, gap_s=0.01, hold=2
    )
    assert Behaviour.parse("/v1/chat/completions") == Behaviour()

"""The relay in front of the model server (`--model-relay`): every byte each way, through the
real `openai` SDK, and the time it read each first-token stamp; its process's protocol; and
each timed first token matched with its read (the report's table: test_streaming_floors.py)."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator

import openai
import pytest

from bench.peers import streaming
from bench.peers.model_server import FINAL_WORDS, STAMP, ModelServer, base_url
from bench.peers.procs import ROOT, child_env
from bench.peers.token_relay import TokenRelay
from tests.bench_peers.model_script import TOOLS, transcript


@pytest.fixture
async def model_port() -> AsyncIterator[int]:
    model = ModelServer()
    yield await model.start()
    await model.close()


async def final_text(port: int) -> list[str]:
    """The final answer's text pieces, streamed through the SDK from `port`."""
    async with openai.AsyncOpenAI(api_key="k", base_url=base_url(port), max_retries=0) as sdk:
        first = await sdk.chat.completions.create(model="m", messages=transcript(0), tools=TOOLS)
        assert first.choices[0].finish_reason == "tool_calls"
        chunks = await sdk.chat.completions.create(model="m", messages=transcript(3), stream=True)
        return [ch.delta.content async for p in chunks for ch in p.choices if ch.delta.content]


async def test_relays_every_byte_and_notes_when_it_read_each_first_token(
    model_port: int,
) -> None:
    relay = TokenRelay(model_port)
    port = await relay.start()
    try:
        answers = await asyncio.gather(*(final_text(port) for _ in range(3)))
    finally:
        await relay.close()
    stamps = []
    for texts in answers:
        stamp = STAMP.fullmatch(texts[0])
        assert stamp is not None, texts
        assert texts[1:] == FINAL_WORDS
        stamps.append(int(stamp.group(1)))
    # One read noted a stamp, after the model server took it and before the client had it.
    assert sorted(relay.reads) == sorted(stamps)
    assert all(0 <= relay.reads[s] - s < 10**10 for s in stamps)
    assert max(relay.reads.values()) <= time.monotonic_ns()


async def test_an_upstream_that_refuses_closes_the_client_connection() -> None:
    relay = TokenRelay(upstream=1)  # nothing listens on port 1
    port = await relay.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
        assert await asyncio.wait_for(reader.read(), timeout=10) == b""
        writer.close()
    finally:
        await relay.close()
    assert relay.reads == {}


async def test_the_process_prints_its_port_and_its_reads_on_result(model_port: int) -> None:
    proc = await asyncio.create_subprocess_exec(
        *[sys.executable, "-m", "bench.peers.token_relay", "--upstream", str(model_port)],
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        cwd=ROOT,
        env=child_env(),
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        line = (await asyncio.wait_for(proc.stdout.readline(), timeout=30)).decode()
        assert line.startswith("listening ")
        texts = await final_text(int(line.split()[1]))
        proc.stdin.write(b"result\n")
        await proc.stdin.drain()
        result = (await asyncio.wait_for(proc.stdout.readline(), timeout=30)).decode()
        assert await asyncio.wait_for(proc.wait(), timeout=30) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert result.startswith("RESULT ")
    payload = json.loads(result.removeprefix("RESULT "))
    stamp = STAMP.fullmatch(texts[0])
    assert stamp is not None
    assert [read[0] for read in payload["reads"]] == [int(stamp.group(1))]
    assert payload["cpu_s"] > 0


def test_each_timed_first_token_gets_the_relays_read_in_the_same_order() -> None:
    relayed = {"reads": [[100, 2_100_100], [200, 700_200], [999, 5_000_999]], "cpu_s": 0.5}
    reads = streaming.relay_reads([200, 100, 300], relayed, streams=250)
    # 300 never passed the relay (a stream it did not carry): no figure, nothing invented.
    assert reads["relay_read_ms"] == [0.7, 2.1]
    assert reads["relay_cpu_ms"] == 2.0

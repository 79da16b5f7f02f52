"""CPU a streamed model call costs the process that makes it: Pressloop's OpenAI adapter beside
the official SDK's own ways of making the same call, and a floor.

Each way streams the same Chat Completions answers from the peers' model server
(`bench/peers/model_server.py`, OpenAI's wire protocol, in its own process) and reads every
chunk as JSON; `concurrency` calls at once, as when many turns wait on the model. Two answers:
a tool call (5 events: the role, the call's two pieces, the finish, the usage) and, once the
transcript holds three tool results, the final text (13 events: 10 pieces of text); their
difference over 8 is what one more event (a token) costs.
CPU is this process's user and system time over a round of calls (the server's is not counted).
Rounds are interleaved (A B C D A B C D ...) so the machine's busy spells fall on every way
alike; the table gives the median of the rounds and their spread, and each way's ratio to the
floor.

- `sdk typed create`: `client.chat.completions.create(stream=True)`, the SDK's typed path (what
  the OpenAI Agents SDK and Pydantic AI call), each chunk a typed object;
- `sdk post`: the SDK's generic `post(..., cast_to=object, stream=True)` with the body as bytes
  (Pressloop's streamed calls until `providers/stream_calls.py`);
- `pressloop`: `OpenAIChatProvider.stream` as the engine calls it (parts, the tool call decoded);
- `floor`: aiohttp alone (what the SDK's transport runs on): the request, the lines read, the
  JSON decoded, nothing else.

    python -m bench.model_client [--calls 400] [--concurrency 50] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
from collections.abc import Awaitable, Callable
from pathlib import Path
from statistics import median
from tempfile import TemporaryDirectory

import aiohttp
import openai

from bench.common import table
from bench.peers.model_server import base_url
from bench.peers.procs import model_server
from bench.peers.streaming import cpu, cpu_line
from pressloop.contracts import ActionCall, Message, Role
from pressloop.providers.base import ModelRequest
from pressloop.providers.openai_chat import OpenAIChatProvider, to_messages
from pressloop.providers.wire import http_client

MESSAGE = "Call the noop tool three times, one call per round, then say done."
SYSTEM = "You run a site."
ROUNDS = 3  # tool results in the transcript before the model server answers with text
EXTRA_EVENTS = 8  # the text answer's events beyond the tool call's
STREAM = {"stream": True, "stream_options": {"include_usage": True}}
WARMUP = 20  # untimed calls of each way first: connections opened, code paths warm


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


Call = Callable[[], Awaitable[None]]


def transcript(rounds: int) -> list[Message]:
    """The person's message, then `rounds` tool calls and their results."""
    messages = [Message(role=Role.USER, content=MESSAGE)]
    for n in range(rounds):
        call = ActionCall(id=f"call_{n}", name="noop", params={})
        messages.append(Message(role=Role.ASSISTANT, content="", tool_calls=[call]))
        messages.append(Message(role=Role.TOOL, content="ok", tool_call_id=call.id))
    return messages


async def ways(
    url: str, rounds: int, stack: list[Callable[[], Awaitable[None]]]
) -> dict[str, Call]:
    """Each way of making the call, set up once (clients and pools are made before timing)."""
    sdk = openai.AsyncOpenAI(
        api_key="sk-bench", base_url=url, max_retries=0, http_client=http_client(openai, 1000)
    )
    provider = OpenAIChatProvider(api_key="sk-bench", model="m", base_url=url, timeout_s=60)
    session = aiohttp.ClientSession()
    stack += [sdk.close, provider.aclose, session.close]
    request = ModelRequest(system=SYSTEM, messages=transcript(rounds))
    messages = to_messages(request)  # the same JSON for every way
    body = json.dumps({"model": "m", "messages": messages, **STREAM}).encode()

    async def typed() -> None:
        chunks = await sdk.chat.completions.create(
            model="m",
            messages=messages,  # type: ignore[arg-type]
            stream=True,
            stream_options={"include_usage": True},
        )
        async with chunks:
            async for _chunk in chunks:
                pass

    async def post() -> None:
        chunks = await sdk.post(
            "/chat/completions",
            content=body,
            cast_to=object,
            stream=True,
            stream_cls=openai.AsyncStream[object],
        )
        async with chunks:
            async for _chunk in chunks:
                pass

    async def pressloop() -> None:
        async for _part in provider.stream(request):
            pass

    async def floor() -> None:
        headers = {"Content-Type": "application/json", "Authorization": "Bearer sk-bench"}
        async with session.post(f"{url}/chat/completions", data=body, headers=headers) as answer:
            async for line in answer.content:
                if line.startswith(b"data: ") and not line.startswith(b"data: [DONE]"):
                    json.loads(line[6:])

    return {"sdk typed create": typed, "sdk post": post, "pressloop": pressloop, "floor": floor}


Found = dict[tuple[str, str], list[float]]  # (answer, way) -> ms of CPU a call, a round each
ANSWERS = {"tool call": 0, "text": ROUNDS}


async def measure(calls: int, concurrency: int, rounds: int) -> Found:
    """ms of CPU a call, one value a round, for every answer and way."""
    with TemporaryDirectory() as logs:
        async with model_server(Path(logs) / "model-server.log") as port:
            closing: list[Callable[[], Awaitable[None]]] = []
            try:
                made = {
                    (answer, name): call
                    for answer, done in ANSWERS.items()
                    for name, call in (await ways(base_url(port), done, closing)).items()
                }
                for call in made.values():
                    for _ in range(WARMUP):
                        await call()
                found: Found = {key: [] for key in made}
                batches = calls // concurrency
                for _ in range(rounds):
                    for key, call in made.items():
                        started = cpu_s()
                        for _ in range(batches):
                            await asyncio.gather(*(call() for _ in range(concurrency)))
                        spent = cpu_s() - started
                        found[key].append(spent * 1000 / (batches * concurrency))
                return found
            finally:
                for close in closing:
                    await close()


def render(found: Found) -> str:
    def cell(values: list[float]) -> str:
        return f"{median(values):.3f} ({min(values):.3f}-{max(values):.3f})"

    names = dict.fromkeys(name for _answer, name in found)
    floor = median(found[("tool call", "floor")])
    rows = []
    for name in names:
        tool, text = found[("tool call", name)], found[("text", name)]
        event = (median(text) - median(tool)) / EXTRA_EVENTS
        ratio = f"{median(tool) / floor:.2f}x"
        rows.append([name, cell(tool), ratio, cell(text), f"{event * 1000:.0f}"])
    header = [
        "way",
        "tool-call answer: CPU a call (ms), median (rounds' spread)",
        "vs floor",
        "text answer: CPU a call (ms)",
        "one more event (µs)",
    ]
    return table(header, rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=400, help="calls of each way a round")
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    found = asyncio.run(measure(options.calls, options.concurrency, options.rounds))
    print(cpu_line(cpu()))
    print(
        f"{options.calls} streamed calls a way a round, {options.concurrency} at once, "
        f"{options.rounds} rounds interleaved"
    )
    print()
    print(render(found))


if __name__ == "__main__":
    main()

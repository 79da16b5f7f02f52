"""The floors every system is compared with: what a turn costs with no agent runtime at all.

- The bare model turn: the 4 requests of a turn (the growing transcript: message, then each
  tool call and its result) sent with the `openai` SDK, nothing stored. Streamed or not, like
  the system it is subtracted from.
- The bare durable commit: one transaction inserting one small row through Pressloop's own
  `Database.write()` (SQLite: WAL, synchronous=NORMAL, BEGIN IMMEDIATE; PostgreSQL: asyncpg).
"""

from __future__ import annotations

import time

import httpx2
import openai
from openai.types.chat import (
    ChatCompletionMessageFunctionToolCallParam,
    ChatCompletionMessageParam,
    ChatCompletionToolUnionParam,
)

from bench.peers.system import INSTRUCTIONS, MESSAGE, ROUNDS

TOOLS: list[ChatCompletionToolUnionParam] = [
    {
        "type": "function",
        "function": {
            "name": "noop",
            "description": "Does nothing and answers ok.",
            "parameters": {"type": "object", "properties": {}},
        },
    }
]


class BareModel:
    """`aiohttp`: the SDK on its aiohttp transport (what Pressloop's providers use), every
    connection kept alive; else the SDK's default client (httpx2), as the peers use it."""

    def __init__(self, model_url: str, *, aiohttp: bool = False) -> None:
        http_client = None
        if aiohttp:
            limits = httpx2.Limits(max_connections=1000, max_keepalive_connections=1000)
            http_client = openai.DefaultAioHttpClient(limits=limits)
        self.client = openai.AsyncOpenAI(
            api_key="bench", base_url=model_url, max_retries=0, http_client=http_client
        )

    async def turn(self, *, stream: bool) -> float:
        """Seconds for the 4 model calls of one turn."""
        started = time.perf_counter()
        messages: list[ChatCompletionMessageParam] = [
            {"role": "system", "content": INSTRUCTIONS},
            {"role": "user", "content": MESSAGE},
        ]
        for _round in range(ROUNDS + 1):
            call_id = await self._call(messages, stream=stream)
            if call_id is None:
                break
            call: ChatCompletionMessageFunctionToolCallParam = {
                "id": call_id,
                "type": "function",
                "function": {"name": "noop", "arguments": "{}"},
            }
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
            messages.append({"role": "tool", "tool_call_id": call_id, "content": "ok"})
        return time.perf_counter() - started

    async def _call(
        self, messages: list[ChatCompletionMessageParam], *, stream: bool
    ) -> str | None:
        if not stream:
            completion = await self.client.chat.completions.create(
                model="bench",
                messages=messages,
                tools=TOOLS,
            )
            calls = completion.choices[0].message.tool_calls or []
            return calls[0].id if calls else None
        call_id = None
        chunks = await self.client.chat.completions.create(
            model="bench",
            messages=messages,
            tools=TOOLS,
            stream=True,
            stream_options={"include_usage": True},
        )
        async for chunk in chunks:
            for choice in chunk.choices:
                for piece in choice.delta.tool_calls or []:
                    call_id = call_id or piece.id
        return call_id

    async def close(self) -> None:
        await self.client.close()


class BareCommit:
    """One small INSERT per transaction through Pressloop's `Database.write()`."""

    def __init__(self, url: str) -> None:
        import sqlalchemy as sa

        from pressloop.store.db import Database

        self.database = Database.open(url)
        self.metadata = sa.MetaData()
        self.table = sa.Table(
            "bench_commit_floor",
            self.metadata,
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
            sa.Column("payload", sa.String(64), nullable=False),
        )
        self.count = 0

    async def prepare(self) -> None:
        async with self.database.write() as conn:
            await conn.run_sync(self.metadata.create_all)

    async def commit(self) -> float:
        self.count += 1
        started = time.perf_counter()
        async with self.database.write() as conn:
            await conn.execute(self.table.insert(), {"payload": f"row {self.count}"})
        return time.perf_counter() - started

    async def close(self) -> None:
        await self.database.close()

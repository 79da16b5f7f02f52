"""Pydantic AI: an `Agent` with the no-op tool on `OpenAIChatModel` (the bench's model server), its
message history stored after each run, as its documentation shows (`all_messages_json()` in,
`ModelMessagesTypeAdapter` out), in one table on the same aiosqlite / asyncpg drivers as
Pressloop. Pydantic AI stores nothing by itself during a run; its durable execution comes from
Temporal, DBOS or Prefect, which are not part of this comparison."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import openai
import sqlalchemy as sa
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ToolReturnPart,
)
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from bench.peers.system import INSTRUCTIONS, Target, check_turn, noop

METADATA = sa.MetaData()
HISTORY = sa.Table(
    "pydantic_ai_history",
    METADATA,
    sa.Column("thread_id", sa.String(64), primary_key=True),
    sa.Column("messages", sa.Text, nullable=False),
    sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
)


class PydanticAISystem:
    key = "pydantic-ai"
    streams = False
    clone_excluded: tuple[str, ...] = ()

    def __init__(self) -> None:
        self.client: openai.AsyncOpenAI | None = None
        self.engine: AsyncEngine | None = None
        self.agent: Agent[None, str] | None = None

    async def open(self, target: Target) -> None:
        self.client = openai.AsyncOpenAI(api_key="bench", base_url=target.model_url, max_retries=0)
        pool: dict[str, Any] = {}
        if target.database == "postgres":
            pool = {"pool_size": 20, "max_overflow": max(0, target.pool - 20)}
        self.engine = create_async_engine(target.sqlalchemy_url(), **pool)
        async with self.engine.begin() as conn:
            await conn.run_sync(METADATA.create_all)
        model = OpenAIChatModel("bench", provider=OpenAIProvider(openai_client=self.client))
        self.agent = Agent(model, instructions=INSTRUCTIONS, tools=[noop])

    async def _history(self, thread: str) -> list[ModelMessage]:
        assert self.engine is not None
        async with self.engine.connect() as conn:
            stored = await conn.scalar(
                sa.select(HISTORY.c.messages).where(HISTORY.c.thread_id == thread)
            )
        return ModelMessagesTypeAdapter.validate_json(stored) if stored else []

    async def _save(self, thread: str, messages_json: bytes) -> None:
        assert self.engine is not None
        values = {"messages": messages_json.decode(), "updated_at": datetime.now(UTC)}
        async with self.engine.begin() as conn:
            updated = await conn.execute(
                HISTORY.update().where(HISTORY.c.thread_id == thread).values(**values)
            )
            if updated.rowcount == 0:
                await conn.execute(HISTORY.insert().values(thread_id=thread, **values))

    async def new_thread(self) -> str:
        return str(uuid.uuid4())

    async def turn(self, thread: str, message: str) -> None:
        assert self.agent is not None
        history = await self._history(thread)
        result = await self.agent.run(message, message_history=history)
        self._check(result.new_messages(), result.output)
        await self._save(thread, result.all_messages_json())

    def _check(self, messages: list[ModelMessage], output: str) -> None:
        tools = sum(
            1
            for m in messages
            if isinstance(m, ModelRequest)
            for part in m.parts
            if isinstance(part, ToolReturnPart)
        )
        check_turn(self.key, tools, output)

    async def stream(self, thread: str, message: str) -> AsyncIterator[str]:
        assert self.agent is not None
        history = await self._history(thread)
        async with self.agent.run_stream_events(message, message_history=history) as events:
            async for event in events:
                if isinstance(event, PartStartEvent) and isinstance(event.part, TextPart):
                    if event.part.content:
                        yield event.part.content
                elif isinstance(event, PartDeltaEvent) and isinstance(event.delta, TextPartDelta):
                    yield event.delta.content_delta
        assert events.result is not None
        await self._save(thread, events.result.all_messages_json())

    async def resume(self, thread: str, message: str) -> None:
        """Nothing of an interrupted run was stored: the turn is run again from its message,
        on the history saved by the runs before it."""
        await self.turn(thread, message)

    async def close(self) -> None:
        if self.engine is not None:
            await self.engine.dispose()
        if self.client is not None:
            await self.client.close()


def build(_key: str) -> PydanticAISystem:
    return PydanticAISystem()

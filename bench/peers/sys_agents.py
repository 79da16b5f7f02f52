"""The OpenAI Agents SDK: an `Agent` with the no-op `function_tool`, its Chat Completions model on
the bench's model server, and its `SQLAlchemySession` (the SDK's SQL session, on the same
aiosqlite / asyncpg drivers as Pressloop, pool as large as Pressloop's). Tracing is off: it would
upload spans to OpenAI."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import openai
from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession
from agents.items import ToolCallOutputItem
from openai.types.responses import ResponseTextDeltaEvent
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from bench.peers.system import (
    INSTRUCTIONS,
    Target,
    TurnFailed,
    check_answer,
    check_turn,
    noop,
)


class AgentsSystem:
    key = "openai-agents"
    streams = False
    clone_excluded: tuple[str, ...] = ()

    def __init__(self) -> None:
        self.client: openai.AsyncOpenAI | None = None
        self.engine: AsyncEngine | None = None
        self.agent: Agent[Any] | None = None

    async def open(self, target: Target) -> None:
        set_tracing_disabled(True)
        self.client = openai.AsyncOpenAI(api_key="bench", base_url=target.model_url, max_retries=0)
        pool: dict[str, Any] = {}
        if target.database == "postgres":
            pool = {"pool_size": 20, "max_overflow": max(0, target.pool - 20)}
        self.engine = create_async_engine(target.sqlalchemy_url(), **pool)
        self.agent = Agent(
            name="bench",
            instructions=INSTRUCTIONS,
            model=OpenAIChatCompletionsModel(model="bench", openai_client=self.client),
            tools=[function_tool(noop)],
        )
        await SQLAlchemySession("setup", engine=self.engine, create_tables=True).get_items()

    def _session(self, thread: str) -> SQLAlchemySession:
        assert self.engine is not None, "open() first"
        return SQLAlchemySession(thread, engine=self.engine)

    async def new_thread(self) -> str:
        return str(uuid.uuid4())  # a session's row is written with its first items

    async def turn(self, thread: str, message: str) -> None:
        assert self.agent is not None
        result = await Runner.run(self.agent, message, session=self._session(thread))
        self._check(result.new_items, result.final_output)

    def _check(self, items: list[Any], output: Any) -> None:
        tools = sum(1 for item in items if isinstance(item, ToolCallOutputItem))
        check_turn(self.key, tools, str(output))

    async def stream(self, thread: str, message: str) -> AsyncIterator[str]:
        assert self.agent is not None
        result = Runner.run_streamed(self.agent, message, session=self._session(thread))
        async for event in result.stream_events():
            if event.type == "raw_response_event" and isinstance(
                event.data, ResponseTextDeltaEvent
            ):
                yield event.data.delta

    async def resume(self, thread: str, message: str) -> None:
        """The SDK resumes runs paused for an approval (`RunState`), not crashed ones: what it
        offers after a crash is the session. Run again on it with no new input; the model
        sees whatever the session kept."""
        assert self.agent is not None
        session = self._session(thread)
        if not await session.get_items():
            raise TurnFailed("openai-agents: the session kept nothing to resume from")
        result = await Runner.run(self.agent, [], session=session)
        check_answer(self.key, str(result.final_output))

    async def close(self) -> None:
        if self.engine is not None:
            await self.engine.dispose()
        if self.client is not None:
            await self.client.close()


def build(_key: str) -> AgentsSystem:
    return AgentsSystem()

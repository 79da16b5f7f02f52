"""LangGraph: the ReAct-style graph of its documentation (`MessagesState`, an agent node, the
prebuilt `ToolNode` and `tools_condition`), checkpointed after every step by
`langgraph-checkpoint-sqlite` (`AsyncSqliteSaver`) or `langgraph-checkpoint-postgres`
(`AsyncPostgresSaver` on a psycopg pool as large as Pressloop's).

The agent node calls the `openai` SDK itself (langchain-openai is not part of the peers group,
and every system here pays the same client): LangChain messages in, an `AIMessage` with its tool
calls out. `durability` is LangGraph's own switch: "async" (its default) writes a step's
checkpoint while the next step runs, "sync" waits for it before the next step starts.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any, Literal, cast

import openai
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage, convert_to_openai_messages
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.config import get_stream_writer
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolUnionParam

from bench.peers.system import INSTRUCTIONS, Target, TurnFailed, check_answer, check_turn


@tool
def noop() -> str:
    """Does nothing and answers ok."""
    return "ok"


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


class LangGraphSystem:
    streams = False
    clone_excluded = ("checkpoint_migrations",)

    def __init__(self, key: str, durability: Literal["async", "sync"]) -> None:
        self.key = key
        self.durability: Literal["async", "sync"] = durability
        self.client: openai.AsyncOpenAI | None = None
        self.graph: Any = None
        self._closers: list[Any] = []

    async def open(self, target: Target) -> None:
        self.client = openai.AsyncOpenAI(api_key="bench", base_url=target.model_url, max_retries=0)
        saver = await self._saver(target)
        builder = StateGraph(MessagesState)
        builder.add_node("agent", self._agent)
        builder.add_node("tools", ToolNode([noop]))
        builder.add_edge(START, "agent")
        builder.add_conditional_edges("agent", tools_condition)
        builder.add_edge("tools", "agent")
        self.graph = builder.compile(checkpointer=saver)

    async def _saver(self, target: Target) -> Any:
        if target.database == "sqlite":
            import aiosqlite
            from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

            conn = await aiosqlite.connect(target.sqlite_path)
            self._closers.append(conn.close)
            saver: Any = AsyncSqliteSaver(conn)
        else:
            from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
            from psycopg.rows import dict_row
            from psycopg_pool import AsyncConnectionPool

            pool = AsyncConnectionPool(
                target.postgres_url,
                min_size=1,
                max_size=target.pool,
                kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
                open=False,
            )
            await pool.open()
            self._closers.append(pool.close)
            saver = AsyncPostgresSaver(pool)  # type: ignore[arg-type]
        await saver.setup()
        return saver

    async def _agent(self, state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
        assert self.client is not None
        messages = cast(
            "list[ChatCompletionMessageParam]",
            [
                {"role": "system", "content": INSTRUCTIONS},
                *convert_to_openai_messages(state["messages"]),
            ],
        )
        if config.get("configurable", {}).get("stream_tokens"):
            return {"messages": [await self._streamed(messages)]}
        completion = await self.client.chat.completions.create(
            model="bench",
            messages=messages,
            tools=TOOLS,
        )
        message = completion.choices[0].message
        calls = [
            {"name": c.function.name, "args": json.loads(c.function.arguments or "{}"), "id": c.id}
            for c in message.tool_calls or []
            if c.type == "function"
        ]
        return {"messages": [AIMessage(content=message.content or "", tool_calls=calls)]}

    async def _streamed(self, messages: list[ChatCompletionMessageParam]) -> AIMessage:
        """The answer streamed from the model, each text delta written to LangGraph's `custom`
        stream as it arrives (LangGraph's way for a model that is not a LangChain chat model)."""
        assert self.client is not None
        write = get_stream_writer()
        text: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        stream = await self.client.chat.completions.create(
            model="bench",
            messages=messages,
            tools=TOOLS,
            stream=True,
        )
        async for chunk in stream:
            for choice in chunk.choices:
                if choice.delta.content:
                    text.append(choice.delta.content)
                    write(choice.delta.content)
                for piece in choice.delta.tool_calls or []:
                    call = calls.setdefault(piece.index, {"id": "", "name": "", "args": ""})
                    call["id"] = call["id"] or piece.id or ""
                    if piece.function is not None:
                        call["name"] = call["name"] or piece.function.name or ""
                        call["args"] += piece.function.arguments or ""
        tool_calls = [
            {"name": c["name"], "args": json.loads(c["args"] or "{}"), "id": c["id"]}
            for _i, c in sorted(calls.items())
        ]
        return AIMessage(content="".join(text), tool_calls=tool_calls)

    def _config(self, thread: str, stream_tokens: bool = False) -> RunnableConfig:
        return {"configurable": {"thread_id": thread, "stream_tokens": stream_tokens}}

    async def new_thread(self) -> str:
        return str(uuid.uuid4())  # LangGraph threads need no row until their first checkpoint

    async def turn(self, thread: str, message: str) -> None:
        state = await self.graph.ainvoke(
            {"messages": [HumanMessage(message)]},
            self._config(thread),
            durability=self.durability,
        )
        self._check(state)

    def _check(self, state: dict[str, Any]) -> None:
        messages = state["messages"]
        last_human = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage))
        tools = sum(1 for m in messages[last_human:] if isinstance(m, ToolMessage))
        check_turn(self.key, tools, str(messages[-1].content))

    async def stream(self, thread: str, message: str) -> AsyncIterator[str]:
        async for delta in self.graph.astream(
            {"messages": [HumanMessage(message)]},
            self._config(thread, stream_tokens=True),
            stream_mode="custom",
            durability=self.durability,
        ):
            yield str(delta)

    async def resume(self, thread: str, message: str) -> None:
        """LangGraph's resume: invoke the thread with no input; it continues from its last
        checkpoint."""
        if not (await self.graph.aget_state(self._config(thread))).values:
            raise TurnFailed("langgraph: no checkpoint to resume from")
        state = await self.graph.ainvoke(None, self._config(thread), durability=self.durability)
        check_answer(self.key, str(state["messages"][-1].content))

    async def close(self) -> None:
        for close in reversed(self._closers):
            await close()
        if self.client is not None:
            await self.client.close()


def build(key: str) -> LangGraphSystem:
    return LangGraphSystem(key, "sync" if key.endswith("-sync") else "async")

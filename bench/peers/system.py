"""What every system under test offers the workloads, whatever its API.

A system is opened on one database and one model URL, makes threads (conversations), runs one
turn on a thread (the message, 3 rounds of the no-op tool, the final answer, everything the
system stores made durable its own way), streams a turn's text, and resumes a turn that a crash
interrupted. Each adapter module (`sys_*.py`) imports only its own library, so a child process
measuring one system loads no other.
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

MESSAGE = "Call the noop tool three times, one call per round, then say done."
INSTRUCTIONS = "You are a test agent. Use the tools you are given."
ROUNDS = 3

SYSTEMS = {
    "pressloop": "Pressloop",
    "langgraph": "LangGraph (durability=async)",
    "langgraph-sync": "LangGraph (durability=sync)",
    "openai-agents": "OpenAI Agents SDK",
    "pydantic-ai": "Pydantic AI",
}
MODULES = {
    "pressloop": "sys_pressloop",
    "langgraph": "sys_langgraph",
    "langgraph-sync": "sys_langgraph",
    "openai-agents": "sys_agents",
    "pydantic-ai": "sys_pydantic_ai",
    "relay": "sys_relay",
}
# Not systems compared: the floors of workload 3, shown beside them. "direct": the bench client
# reading the model server with nothing between (bench/peers/streaming.py); "relay": the
# turn's model calls relayed by the bench SSE app, no agent, no store (sys_relay.py).
FLOORS = {
    "direct": "Floor: harness alone (model server to client)",
    "relay": "Floor: bare relay (SSE app, no agent, no store)",
}


@dataclass(kw_only=True)
class Target:
    """Where a system keeps its state and which model it talks to."""

    database: str  # "sqlite" | "postgres"
    sqlite_path: str = ""  # the SQLite file (database == "sqlite")
    postgres_url: str = ""  # postgresql://user@host:port/name (database == "postgres")
    model_url: str  # the OpenAI base URL, ending in /v1
    pool: int = 30  # database connections a system may hold (Pressloop's default: 20 + 10)
    data_dir: str = ""  # scratch space for the system's own files

    def sqlalchemy_url(self) -> str:
        if self.database == "sqlite":
            return f"sqlite+aiosqlite:///{self.sqlite_path}"
        return self.postgres_url.replace("postgresql://", "postgresql+asyncpg://", 1)


class TurnFailed(RuntimeError):
    """A turn did not make exactly 3 tool calls and a final answer."""


class System(Protocol):
    key: str
    # Whether `turn` streams from the model (Pressloop always does): the bare model call it is
    # compared with is then a streamed one too.
    streams: bool
    # The system's own tables a history prefill clones (the others are left alone).
    clone_excluded: tuple[str, ...]

    async def open(self, target: Target) -> None: ...

    async def new_thread(self) -> str: ...

    async def turn(self, thread: str, message: str) -> None: ...

    def stream(self, thread: str, message: str) -> AsyncIterator[str]: ...

    async def resume(self, thread: str, message: str) -> None: ...

    async def close(self) -> None: ...


def load(key: str) -> System:
    module = importlib.import_module(f"bench.peers.{MODULES[key]}")
    system: System = module.build(key)
    return system


def check_turn(key: str, tool_calls: int, text: str) -> None:
    if tool_calls != ROUNDS or "ok." not in text:
        raise TurnFailed(f"{key}: {tool_calls} tool calls and final text {text[:80]!r}")


def check_answer(key: str, text: str) -> None:
    """A resumed turn ends with the final answer (where it resumed is the model server's to
    tell: it counts the tool results each request carries)."""
    if "ok." not in text:
        raise TurnFailed(f"{key}: the resumed turn ended with {text[:80]!r}")


def noop() -> str:
    """Does nothing and answers ok."""
    return "ok"

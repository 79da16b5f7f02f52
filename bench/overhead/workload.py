"""The workload: a turn of 3 no-op tool rounds, and counting its commits and statements."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict
from sqlalchemy import event
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from pressloop.actions.registry import ActionResult, ActionServices, ActionSpec
from pressloop.contracts import ActionContext, Risk

ROUNDS = 3
GOAL_RATIO = 3.0
MESSAGE = "Run the no-op action three times, then say done."
START_MARKER = "<!-- loop_overhead:start -->"
END_MARKER = "<!-- loop_overhead:end -->"
DEFAULT_POSTGRES = os.environ.get(
    "PRESSLOOP_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test"
)
DATABASE_NAMES = {"sqlite": "SQLite", "postgres": "PostgreSQL"}


class NoopParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    note: str | None = None


async def noop(
    params: NoopParams, context: ActionContext, services: ActionServices
) -> ActionResult:
    return ActionResult(content="ok", summary="ok")


NOOP = ActionSpec(
    name="noop",
    description="Does nothing and answers ok.",
    params=NoopParams,
    risk=Risk.READ,
    handler=noop,
)


def script(rounds: int) -> list[dict[str, Any]]:
    return [
        *({"tool_calls": [{"name": "noop", "arguments": {}}]} for _ in range(rounds)),
        {"text": "done"},
    ]


# Counting commits -----------------------------------------------------------------------------


@dataclass(kw_only=True)
class CommitCounter:
    """Counts transactions that wrote, transactions that only read, and statements sent."""

    write_commits: int = 0
    read_commits: int = 0
    statements: int = 0

    def attach(self, engine: AsyncEngine) -> None:
        event.listen(engine.sync_engine, "begin", self._begin)
        event.listen(engine.sync_engine, "before_cursor_execute", self._execute)
        event.listen(engine.sync_engine, "commit", self._commit)

    def detach(self, engine: AsyncEngine) -> None:
        event.remove(engine.sync_engine, "begin", self._begin)
        event.remove(engine.sync_engine, "before_cursor_execute", self._execute)
        event.remove(engine.sync_engine, "commit", self._commit)

    def _begin(self, conn: Connection) -> None:
        conn.info["bench_wrote"] = False

    def _execute(
        self,
        conn: Connection,
        _cursor: Any,
        statement: str,
        _parameters: Any,
        _context: Any,
        _executemany: bool,
    ) -> None:
        verb = statement.lstrip()[:6].upper()
        if verb != "BEGIN ":  # SQLite's explicit BEGIN IMMEDIATE; asyncpg's is implicit
            self.statements += 1
        if verb in ("INSERT", "UPDATE", "DELETE"):
            conn.info["bench_wrote"] = True

    def _commit(self, conn: Connection) -> None:
        if conn.info.get("bench_wrote"):
            self.write_commits += 1
        else:
            self.read_commits += 1

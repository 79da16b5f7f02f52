"""What a run reads before its first model call, read for a whole batch of claimed runs at once.

A worker claims runs in batches; reading each run's agent, history, memories, the kill switch
and the day's budget counters one run at a time cost five statements and a transaction per run
just when hundreds of runs start together. Read in the claim's transaction for the batch, it is
five statements for all of them, and a run starts without touching the database.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from sqlalchemy.ext.asyncio import AsyncConnection

from pressloop.config import Settings
from pressloop.contracts import Message
from pressloop.engine.ports import MemoryNote
from pressloop.errors import BudgetExceeded
from pressloop.runtime.budgets import Subject, Used, budget_refusal, stored_use, usage_rows
from pressloop.store import agents as agent_store
from pressloop.store import memories as memory_store
from pressloop.store import settings_repo
from pressloop.store import threads as thread_store
from pressloop.store.records import AgentRecord, RunRecord

if TYPE_CHECKING:  # turn_reads.py builds on this module (the kill switch's setting)
    from pressloop.runtime.turn_reads import TurnReads

KILL_SWITCH_SETTING = "agent_disabled"
MEMORY_ITEMS = 8


@dataclass(kw_only=True)
class RunContext:
    agent: AgentRecord | None
    history: list[Message]
    memories: list[MemoryNote]  # the most relevant first; untrusted ones say so
    disabled: bool  # the kill switch
    # A new turn's daily budget is used up. A resumed turn (an approval was decided) has none:
    # the step a person approved runs, and the budgets are checked at each model call and action.
    refusal: BudgetExceeded | None


async def load_contexts(
    conn: AsyncConnection,
    runs: Sequence[RunRecord],
    *,
    settings: Settings,
    day: str,
    history_limit: int,
    now: datetime | None = None,
    reads: TurnReads | None = None,
) -> dict[str, RunContext]:
    """Each run's context (by run id), in a fixed number of statements whatever the count.
    `reads`: the agent, kill switch and counters this transaction read already for a new turn
    (`turn_reads.py`); used when they are every run's (two statements then)."""
    if not runs:
        return {}
    shared = reads if reads is not None and all(reads.covers(r, day=day) for r in runs) else None
    histories = await thread_store.recent_messages(
        conn, list(dict.fromkeys(run.thread_id for run in runs)), limit=history_limit
    )
    memories = {
        agent_id: await memory_store.recent_memories(conn, agent_id)
        for agent_id in sorted({run.agent_id for run in runs})
    }
    if shared is not None:
        agents = {shared.agent_id: shared.agent} if shared.agent is not None else {}
        disabled = settings.disable_agent or shared.switched_off
        used = stored_use(shared.usage)
    else:
        agents = await agent_store.get_agents(conn, {run.agent_id for run in runs})
        disabled = settings.disable_agent or bool(
            await settings_repo.get_setting(conn, KILL_SWITCH_SETTING, False)
        )
        used = stored_use(
            await usage_rows(conn, settings, users={run.requesting_user for run in runs}, day=day)
        )
    return {
        run.id: RunContext(
            agent=agents.get(run.agent_id),
            # Runs of one thread are never claimed together (one at a time per thread).
            history=list(histories[run.thread_id]),
            memories=[
                MemoryNote(content=m.content, untrusted=m.untrusted)
                for m in memory_store.rank_memories(
                    memories[run.agent_id], run.input or "", limit=MEMORY_ITEMS
                )
            ],
            disabled=disabled,
            refusal=_refusal(used, settings, run, now),
        )
        for run in runs
    }


def _refusal(
    used: dict[Subject, Used], settings: Settings, run: RunRecord, now: datetime | None
) -> BudgetExceeded | None:
    if run.checkpoint is not None:
        return None
    refusal = budget_refusal(used, settings, run.requesting_user, now=now)
    return BudgetExceeded(refusal.message) if refusal is not None else None

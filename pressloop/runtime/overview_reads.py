"""What the admin UI's overview pages show beside each thread or schedule: its newest run, its
children, a schedule's last beats. Each read answers for a whole page in a few queries (the SQL
is in `store/overview.py`), never one query per row.

A mixin of `Service`, which provides `database`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pressloop.store import overview as overview_store
from pressloop.store import threads as thread_store
from pressloop.store.db import Database
from pressloop.store.overview import RunBrief
from pressloop.store.records import ThreadRecord


@dataclass(frozen=True, kw_only=True)
class ThreadOverview:
    """The thread list: the threads, the newest run of each (if any) and how many children."""

    threads: list[ThreadRecord]
    last_runs: dict[str, RunBrief]
    child_counts: dict[str, int]


@dataclass(frozen=True, kw_only=True)
class TreeNode:
    """A spawned thread under the one shown, `level` steps down, with its newest run."""

    thread: ThreadRecord
    level: int
    last_run: RunBrief | None


class OverviewReads:
    database: Database

    async def thread_overview(self, *, limit: int = 50) -> ThreadOverview:
        async with self.database.read() as conn:
            listed = await thread_store.list_threads(conn, limit=limit)
            ids = [t.id for t in listed]
            last = await overview_store.last_runs(conn, ids)
            children = await overview_store.child_counts(conn, ids)
        return ThreadOverview(threads=listed, last_runs=last, child_counts=children)

    async def thread_tree(self, thread_id: str) -> list[TreeNode]:
        """The threads spawned under `thread_id`, breadth first (spawning nests at most two
        deep by design, so a level at a time is few queries)."""
        tree: list[TreeNode] = []
        frontier = [(thread_id, 0)]
        async with self.database.read() as conn:
            while frontier:
                parent_id, level = frontier.pop(0)
                kids = await thread_store.list_threads(conn, parent_id=parent_id)
                last = await overview_store.last_runs(conn, [k.id for k in kids])
                for kid in kids:
                    tree.append(TreeNode(thread=kid, level=level + 1, last_run=last.get(kid.id)))
                    frontier.append((kid.id, level + 1))
        return tree

    async def schedule_beats(
        self, schedule_ids: Sequence[str], *, limit: int
    ) -> dict[str, list[RunBrief]]:
        """The newest `limit` runs each schedule started, by schedule id (the scheduler keys a
        beat's run `schedule:<id>:<due time>`, `runtime/heartbeat_runs.py`)."""
        async with self.database.read() as conn:
            return {
                schedule_id: await overview_store.runs_by_key_prefix(
                    conn, f"schedule:{schedule_id}:", limit=limit
                )
                for schedule_id in schedule_ids
            }

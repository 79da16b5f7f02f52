"""The memory actions' storage: the database, through the store's memory repository."""

from __future__ import annotations

from typing import Any

from pressloop.clock import Now
from pressloop.store import memories as memory_store
from pressloop.store.db import Database


class StoreMemory:
    def __init__(self, database: Database, now: Now) -> None:
        self.database = database
        self.now = now

    async def remember(
        self, agent_id: str, content: str, tags: list[str], *, untrusted: bool = False
    ) -> int:
        async with self.database.write() as conn:
            record = await memory_store.add_memory(
                conn,
                agent_id=agent_id,
                content=content,
                tags=tags,
                now=self.now(),
                untrusted=untrusted,
            )
        return record.id

    async def recall(self, agent_id: str, query: str, limit: int) -> list[dict[str, Any]]:
        async with self.database.read() as conn:
            found = await memory_store.search_memories(conn, agent_id, query, limit=limit)
        return [
            {"id": m.id, "content": m.content, "tags": m.tags, "untrusted": m.untrusted}
            for m in found
        ]

    async def forget(self, agent_id: str, ids: list[int]) -> int:
        async with self.database.write() as conn:
            return await memory_store.delete_memories(conn, agent_id, ids)

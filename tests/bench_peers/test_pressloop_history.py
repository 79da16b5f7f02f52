"""The peers benchmark's Pressloop adapter and history prefill, on both databases: a real turn
through the real HTTP model server, copied into Pressloop's own tables, must read back as whole
conversations, and the store must keep working after the load."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from bench.peers import prefill
from bench.peers.model_server import ModelServer, base_url
from bench.peers.sys_pressloop import PressloopSystem
from bench.peers.system import MESSAGE, Target
from pressloop.contracts import RunStatus
from pressloop.store.db import Database

COPIES = 40


@pytest.fixture
async def model_port() -> AsyncIterator[int]:
    server = ModelServer()
    yield await server.start()
    await server.close()


def target_for(database_url: str, tmp_path: Path, port: int) -> Target:
    if database_url.startswith("sqlite"):
        path = database_url.split(":///", 1)[1]
        return Target(
            database="sqlite", sqlite_path=path, model_url=base_url(port), data_dir=str(tmp_path)
        )
    plain = database_url.replace("postgresql+asyncpg://", "postgresql://", 1)
    return Target(
        database="postgres", postgres_url=plain, model_url=base_url(port), data_dir=str(tmp_path)
    )


async def count_rows(target: Target, table: str) -> int:
    if target.database == "sqlite":
        with sqlite3.connect(target.sqlite_path) as conn:
            return int(conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0])
    conn = await asyncpg.connect(target.postgres_url)
    try:
        return int(await conn.fetchval(f'SELECT count(*) FROM "{table}"'))
    finally:
        await conn.close()


async def test_copies_of_a_real_turn_read_back_as_conversations(
    database: Database, database_url: str, tmp_path: Path, model_port: int
) -> None:
    target = target_for(database_url, tmp_path, model_port)
    system = PressloopSystem()
    await system.open(target)
    try:
        thread = await system.new_thread()
        await system.turn(thread, MESSAGE)  # raises unless 3 no-op steps and the final text
        template = await prefill.snapshot(target, system.clone_excluded)
        assert thread in template.ids
        names = {t.name for t in template.tables}
        assert {"threads", "runs", "messages", "run_events"} <= names
        assert names.isdisjoint(system.clone_excluded)

        await prefill.clone(target, template, start=1, count=COPIES)

        for table in template.tables:
            assert await count_rows(target, table.name) == (COPIES + 1) * len(table.rows)
        service = system.service
        assert service is not None
        original = await service.thread_detail(thread)
        index = template.ids.index(thread)
        for copy in (1, COPIES):
            copied_id = thread[:-9] + f"{copy:06d}{index:03d}"
            detail = await service.thread_detail(copied_id)
            assert [m.content for m in detail["messages"]] == [
                m.content for m in original["messages"]
            ]
            [run] = detail["runs"]
            assert run.status is RunStatus.SUCCEEDED and run.thread_id == copied_id
            assert run.id != original["runs"][0].id
            events = await service.events(run.id)
            assert len(events) == len(await service.events(original["runs"][0].id))

        # The store still takes new turns after the load.
        await system.turn(await system.new_thread(), MESSAGE)
    finally:
        await system.close()

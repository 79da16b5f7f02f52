"""History for the growth workload: copies of one real turn, inserted straight into a system's own
tables (no system code runs, so 100,000 conversations take seconds, not hours).

`snapshot` reads every row a system wrote for one turn on a fresh database (its setup tables
left out); `clone` inserts copies numbered `start .. start + count - 1`. In each copy, every
identifier of the template (the string values of primary-key columns, 16 characters or more:
thread, run, checkpoint, task, session ids) is replaced wherever it appears, in any text or JSON
column, by one of the same length: its last 9 characters become the copy's number and the id's
own number, so copies never collide with each other or with the template. Auto-increment keys
are left to the database. SQLite goes through `sqlite3.executemany`, PostgreSQL through
`COPY` (asyncpg), then `ANALYZE`, as autovacuum would do after such a load.
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from bench.peers.system import Target

MIN_ID = 16
BATCH = 2000  # copies per insert round


@dataclass(kw_only=True)
class TableRows:
    name: str
    columns: list[str]
    rows: list[tuple[Any, ...]]
    id_columns: list[int] = field(default_factory=list)  # positions of primary-key text columns


@dataclass(kw_only=True)
class Template:
    tables: list[TableRows]
    ids: list[str]

    def rows_per_copy(self) -> int:
        return sum(len(t.rows) for t in self.tables)


# Reading the template --------------------------------------------------------------------------


def _sqlite_snapshot(path: str, excluded: tuple[str, ...]) -> list[TableRows]:
    with sqlite3.connect(path) as conn:
        names = [
            row[0]
            for row in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
            if row[0] not in excluded
        ]
        tables = []
        for name in names:
            info = list(conn.execute(f'PRAGMA table_info("{name}")'))
            keys = [c for c in info if c[5] > 0]
            # A single INTEGER primary key is SQLite's rowid: the database numbers it.
            auto = {keys[0][1]} if len(keys) == 1 and keys[0][2].upper() == "INTEGER" else set()
            columns = [c[1] for c in info if c[1] not in auto]
            text_keys = {c[1] for c in keys if c[1] not in auto}
            quoted = ", ".join(f'"{c}"' for c in columns)
            rows = [tuple(r) for r in conn.execute(f'SELECT {quoted} FROM "{name}"')]
            ids = [i for i, c in enumerate(columns) if c in text_keys]
            tables.append(TableRows(name=name, columns=columns, rows=rows, id_columns=ids))
    return tables


async def _postgres_snapshot(url: str, excluded: tuple[str, ...]) -> list[TableRows]:
    conn = await asyncpg.connect(url)
    try:
        names = [
            r["table_name"]
            for r in await conn.fetch(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = 'public' AND table_type = 'BASE TABLE'"
            )
            if r["table_name"] not in excluded
        ]
        tables = []
        for name in names:
            info = await conn.fetch(
                "SELECT column_name, column_default, is_identity FROM information_schema.columns "
                "WHERE table_schema = 'public' AND table_name = $1 ORDER BY ordinal_position",
                name,
            )
            keys = {
                r["attname"]
                for r in await conn.fetch(
                    "SELECT a.attname FROM pg_index i JOIN pg_attribute a "
                    "ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
                    "WHERE i.indrelid = $1::regclass AND i.indisprimary",
                    f'"{name}"',
                )
            }
            columns = [
                r["column_name"]
                for r in info
                if r["is_identity"] != "YES" and "nextval(" not in (r["column_default"] or "")
            ]
            quoted = ", ".join(f'"{c}"' for c in columns)
            rows = [tuple(r) for r in await conn.fetch(f'SELECT {quoted} FROM "{name}"')]
            ids = [i for i, c in enumerate(columns) if c in keys]
            tables.append(TableRows(name=name, columns=columns, rows=rows, id_columns=ids))
        edges = await conn.fetch(
            "SELECT conrelid::regclass::text AS child, confrelid::regclass::text AS parent "
            "FROM pg_constraint WHERE contype = 'f'"
        )
    finally:
        await conn.close()
    return _parents_first(tables, {(e["child"], e["parent"]) for e in edges})


def _parents_first(tables: list[TableRows], edges: set[tuple[str, str]]) -> list[TableRows]:
    """Tables ordered so that a foreign key's table is filled before the tables that use it."""
    ordered: list[TableRows] = []
    remaining = list(tables)
    while remaining:
        names = {t.name for t in remaining}
        ready = [
            t for t in remaining if not any(c == t.name and p in names and p != c for c, p in edges)
        ]
        if not ready:
            raise ValueError(f"foreign keys form a cycle among {sorted(names)}")
        ordered += ready
        remaining = [t for t in remaining if t not in ready]
    return ordered


async def snapshot(target: Target, excluded: tuple[str, ...]) -> Template:
    if target.database == "sqlite":
        tables = await asyncio.to_thread(_sqlite_snapshot, target.sqlite_path, excluded)
    else:
        tables = await _postgres_snapshot(target.postgres_url, excluded)
    ids: set[str] = set()
    for table in tables:
        for row in table.rows:
            for position in table.id_columns:
                value = row[position]
                text = str(value) if isinstance(value, str | uuid.UUID) else ""
                if len(text) >= MIN_ID:
                    ids.add(text)
    if len(ids) >= 1000:
        raise ValueError(f"a template turn with {len(ids)} ids: at most 999 fit the scheme")
    return Template(tables=[t for t in tables if t.rows], ids=sorted(ids))


# Writing copies ----------------------------------------------------------------------------------


class _Renderer:
    """Renders a template row for copy number `n`: each text value is split once into literal
    pieces and template ids, so a copy costs one join per value that holds an id."""

    def __init__(self, template: Template) -> None:
        self.ids = template.ids
        pattern = "|".join(re.escape(i) for i in sorted(self.ids, key=len, reverse=True))
        self.finder = re.compile(f"({pattern})") if self.ids else None
        self.index = {value: n for n, value in enumerate(self.ids)}
        self.plans = {t.name: [self._plan(row) for row in t.rows] for t in template.tables}

    def _plan(self, row: tuple[Any, ...]) -> list[Any]:
        plan: list[Any] = []
        for value in row:
            text = str(value) if isinstance(value, str | uuid.UUID) else None
            if text is None or self.finder is None or not self.finder.search(text):
                plan.append(("v", value))
                continue
            pieces = self.finder.split(text)  # literal, id, literal, id, ..., literal
            parts = [(p if k % 2 == 0 else self.index[p]) for k, p in enumerate(pieces)]
            plan.append(("u" if isinstance(value, uuid.UUID) else "s", parts))
        return plan

    def mapped(self, n: int) -> list[str]:
        return [v[:-9] + f"{n:06d}{j:03d}" for j, v in enumerate(self.ids)]

    def rows(self, table: str, n: int, mapped: list[str]) -> Iterator[tuple[Any, ...]]:
        for plan in self.plans[table]:
            out = []
            for kind, data in plan:
                if kind == "v":
                    out.append(data)
                    continue
                text = "".join(p if isinstance(p, str) else mapped[p] for p in data)
                out.append(uuid.UUID(text) if kind == "u" else text)
            yield tuple(out)


def _sqlite_insert(
    path: str, template: Template, renderer: _Renderer, start: int, count: int
) -> None:
    with sqlite3.connect(path, timeout=60) as conn:
        for first in range(start, start + count, BATCH):
            numbers = range(first, min(first + BATCH, start + count))
            maps = {n: renderer.mapped(n) for n in numbers}
            for table in template.tables:
                marks = ", ".join("?" for _ in table.columns)
                quoted = ", ".join(f'"{c}"' for c in table.columns)
                conn.executemany(
                    f'INSERT INTO "{table.name}" ({quoted}) VALUES ({marks})',
                    (row for n in numbers for row in renderer.rows(table.name, n, maps[n])),
                )
            conn.commit()


async def _postgres_insert(
    url: str, template: Template, renderer: _Renderer, start: int, count: int
) -> None:
    conn = await asyncpg.connect(url)
    try:
        for first in range(start, start + count, BATCH):
            numbers = range(first, min(first + BATCH, start + count))
            maps = {n: renderer.mapped(n) for n in numbers}
            async with conn.transaction():
                for table in template.tables:
                    records = [r for n in numbers for r in renderer.rows(table.name, n, maps[n])]
                    await conn.copy_records_to_table(
                        table.name, records=records, columns=table.columns
                    )
        await conn.execute("ANALYZE")
    finally:
        await conn.close()


async def clone(target: Target, template: Template, *, start: int, count: int) -> None:
    """Insert copies `start .. start + count - 1` of the template (numbers from 1)."""
    if count <= 0:
        return
    if start + count > 999_999:
        raise ValueError("at most 999,999 copies fit the id scheme")
    renderer = _Renderer(template)
    if target.database == "sqlite":
        await asyncio.to_thread(
            _sqlite_insert, target.sqlite_path, template, renderer, start, count
        )
    else:
        await _postgres_insert(target.postgres_url, template, renderer, start, count)

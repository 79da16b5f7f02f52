"""`column IN (values)` as one statement, however many values there are.

SQLAlchemy renders `column.in_(values)` as `IN ($1, ..., $n)`: a new statement text for every
count of values. On PostgreSQL each distinct text is prepared once per connection (a round trip,
a parse and a plan; asyncpg's and SQLAlchemy's caches keep 100 per connection), so the lists
whose length follows the load (the runs of a group commit, the runs a process looks for cancels
among) prepared a statement on almost every call and pushed the turn's other statements out of
both caches: 87 prepares of the group commit's one SELECT in one run of 200 streams
(docs/benchmarks.md, section 3j). There the list is one array parameter instead,
`column = ANY($1::VARCHAR[])`: one text, prepared once per connection. SQLite prepares in
process, cheaply, and keeps `IN`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.asyncio import AsyncConnection


def among(
    conn: AsyncConnection, column: sa.Column[Any], values: Iterable[Any]
) -> sa.ColumnElement[bool]:
    """`column` is one of `values`, in one statement text per dialect."""
    listed = list(values)
    if conn.dialect.name == "postgresql":
        array = sa.bindparam(None, listed, type_=postgresql.ARRAY(column.type))
        return column == sa.any_(array)
    return column.in_(listed)

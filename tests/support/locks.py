"""Holding a database's locks from the test's side, as another process would."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def sqlite_write_lock(database_url: str) -> Iterator[None]:
    """SQLite's write lock on the database of `database_url` (`sqlite+...:///path`), held by a
    connection of its own until the block ends: every writer waits for it; readers go on."""
    lock = sqlite3.connect(database_url.split(":///", 1)[1], isolation_level=None, timeout=30)
    lock.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        lock.execute("ROLLBACK")
        lock.close()

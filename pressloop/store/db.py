"""Connections and transactions for SQLite and PostgreSQL.

SQLite: WAL, a busy timeout, and `BEGIN IMMEDIATE` for every writing transaction so that two
writers queue at BEGIN instead of failing half-way (the DBOS recipe). Writers of one process
also queue in the process, first come first served but the group commit first (`_Turns`),
before they ask SQLite:
SQLite's busy handler polls, sleeping 1, 2, 5 ... up to 100 ms between tries, so with a few
hundred writers at once (streams starting, their runs' commits) a writer could wait seconds for
a lock that was free most of that time (measured: a group commit of 48 runs took 4.5 s under 200
streams). Then a process's writer takes an OS file lock that the writers of other processes
take too (`write_lock.py`), which wakes a waiter at once instead of polling; SQLite's busy
handler is left for programs that do not take it. PostgreSQL: asyncpg.

Statements built once: the repositories build the statements every turn runs at import time,
with bound parameters (`sa.bindparam`), and execute them with a dict of values (for an UPDATE
or INSERT, the keys name the columns set). SQLAlchemy then skips building the statement and
most of its cache-key work: about 40% of the client CPU a statement costs (measured: a
primary-key SELECT 240 -> 150 us on PostgreSQL, 410 -> 270 us on SQLite).
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
import time
import weakref
from collections import deque
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, closing, nullcontext
from pathlib import Path
from typing import Any

from sqlalchemy import event, select
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from pressloop.private_files import private_sqlite
from pressloop.store.write_lock import FileWriteLock


def normalise_url(url: str) -> str:
    """Accept the URLs people write (`postgresql://`, `sqlite:///`) and pick async drivers."""
    parsed = make_url(url)
    if parsed.drivername in ("postgresql", "postgres", "postgresql+psycopg2"):
        parsed = parsed.set(drivername="postgresql+asyncpg")
    elif parsed.drivername in ("sqlite", "sqlite+pysqlite"):
        parsed = parsed.set(drivername="sqlite+aiosqlite")
    return parsed.render_as_string(hide_password=False)


def _enter_wal(path: Path, busy_timeout_s: float) -> None:
    """Put the database file in WAL mode (kept in the file: done once, at opening).

    Switching needs the file to itself, and SQLite does not call the busy handler for it while
    another connection holds a write lock: two processes opening a new database at once (two
    `pressloop` commands on a fresh data directory) saw "database is locked" at once, the busy
    timeout notwithstanding. So the switch is tried again, after a short jittered pause, until
    the busy timeout, and a file another process has switched meanwhile is taken as it is. It
    runs before the engine exists, when nothing else of this process uses the database.
    """
    deadline = time.monotonic() + busy_timeout_s
    with closing(sqlite3.connect(path, timeout=busy_timeout_s, isolation_level=None)) as conn:
        while True:
            try:
                mode = conn.execute("PRAGMA journal_mode").fetchone()
                if mode is not None and str(mode[0]).lower() == "wal":
                    return
                conn.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() >= deadline:
                    raise
            time.sleep(random.uniform(0.005, 0.05))


def _prepare_sqlite(engine: AsyncEngine, synchronous: str, busy_timeout_s: float) -> None:
    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Take BEGIN out of the driver's hands: we emit it ourselves below.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
        cursor.execute(f"PRAGMA synchronous={synchronous}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: Any) -> None:
        mode = conn.get_execution_options().get("sqlite_begin", "IMMEDIATE")
        conn.exec_driver_sql(f"BEGIN {mode}")


class _Turns:
    """Whose turn it is to write, on one event loop: one writer at a time; waiting writers are
    served first come first served, except that a writer who asked `first` (the group commit,
    whose batch streams and runs wait for) goes before the others."""

    def __init__(self) -> None:
        self.busy = False
        self.waiting_first: deque[asyncio.Future[None]] = deque()
        self.waiting: deque[asyncio.Future[None]] = deque()

    @asynccontextmanager
    async def turn(self, *, first: bool) -> AsyncIterator[None]:
        if self.busy or self.waiting_first or self.waiting:
            queue = self.waiting_first if first else self.waiting
            handed = asyncio.get_running_loop().create_future()
            queue.append(handed)
            try:
                await handed
            except asyncio.CancelledError:
                if handed.done() and not handed.cancelled():
                    self._pass_on()  # given the turn, then cancelled: the next one takes it
                else:
                    queue.remove(handed)
                raise
        else:
            self.busy = True
        try:
            yield
        finally:
            self._pass_on()

    def _pass_on(self) -> None:
        for queue in (self.waiting_first, self.waiting):
            while queue:
                handed = queue.popleft()
                if not handed.done():
                    handed.set_result(None)  # still busy: the turn goes straight to it
                    return
        self.busy = False


class _WriteTurns:
    """The turns of this process's SQLite writers. One `_Turns` per event loop: a Database may
    outlive a loop (CLI commands and tests run several `asyncio.run`s)."""

    def __init__(self) -> None:
        self._turns: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Turns] = (
            weakref.WeakKeyDictionary()
        )

    def turn(self, *, first: bool) -> AbstractAsyncContextManager[None]:
        loop = asyncio.get_running_loop()
        turns = self._turns.get(loop)
        if turns is None:
            turns = self._turns[loop] = _Turns()
        return turns.turn(first=first)


class Database:
    """One engine and the two kinds of transaction every repository function runs inside."""

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        options: dict[str, Any] | None = None,
        file_lock: FileWriteLock | None = None,
    ) -> None:
        self.engine = engine
        self.dialect = engine.dialect.name
        self._write_turns = _WriteTurns() if self.dialect == "sqlite" else None
        # A SQLite file's turns between processes (`write_lock.py`).
        self._file_lock = file_lock
        # What `open` was given: `open_another` opens the same database the same way.
        self._options = options or {}

    @classmethod
    def open(
        cls,
        url: str,
        *,
        sqlite_synchronous: str = "NORMAL",
        pool_size: int = 20,
        max_overflow: int = 10,
        pool_timeout_s: float = 30.0,
        idle_transaction_timeout_s: float = 60.0,
        busy_timeout_s: float = 30.0,
    ) -> Database:
        url = normalise_url(url)
        options = {
            "sqlite_synchronous": sqlite_synchronous,
            "pool_size": pool_size,
            "max_overflow": max_overflow,
            "pool_timeout_s": pool_timeout_s,
            "idle_transaction_timeout_s": idle_transaction_timeout_s,
            "busy_timeout_s": busy_timeout_s,
        }
        parsed = make_url(url)
        file_lock = None
        if parsed.drivername.startswith("sqlite"):
            if parsed.database and parsed.database != ":memory:":
                private_sqlite(Path(parsed.database))  # 0600, in a 0700 directory if new
                _enter_wal(Path(parsed.database), busy_timeout_s)
                file_lock = FileWriteLock(Path(parsed.database), timeout_s=busy_timeout_s)
            # A writer waits this long for another's lock (several processes on one file).
            engine = create_async_engine(url, connect_args={"timeout": busy_timeout_s})
            _prepare_sqlite(engine, sqlite_synchronous, busy_timeout_s)
        else:
            # A paused or partitioned worker must not hold row locks forever: PostgreSQL ends
            # any transaction left idle longer than this (ours last milliseconds).
            timeout_ms = str(max(1000, int(idle_transaction_timeout_s * 1000)))
            engine = create_async_engine(
                url,
                pool_size=pool_size,
                max_overflow=max_overflow,
                pool_timeout=pool_timeout_s,
                # No ping before every checkout (a round trip each, several per run): a
                # connection the server dropped fails its transaction, and the run is retried.
                pool_pre_ping=False,
                pool_recycle=1800,
                connect_args={
                    "server_settings": {"idle_in_transaction_session_timeout": timeout_ms}
                },
            )
        return cls(engine, options=options, file_lock=file_lock)

    def open_another(self, *, pool_size: int) -> Database:
        """The same database opened again, the same way, with a pool of its own of `pool_size`
        connections (no overflow): for another event loop, since an asyncpg connection belongs
        to the loop that opened it. Nothing connects before the first transaction."""
        url = self.engine.url.render_as_string(hide_password=False)
        options = {**self._options, "pool_size": pool_size, "max_overflow": 0}
        return Database.open(url, **options)

    @property
    def is_sqlite(self) -> bool:
        return self.dialect == "sqlite"

    @asynccontextmanager
    async def write(self, *, first: bool = False) -> AsyncIterator[AsyncConnection]:
        """A transaction that may write; commits on success, rolls back on any error. `first`:
        on SQLite this writer goes before the others of this process that wait (the group
        commit: every stream's next frame waits for it)."""
        if self._write_turns is None:
            async with self.engine.begin() as conn:
                yield conn
            return
        other_processes = self._file_lock.held() if self._file_lock else nullcontext()
        async with (
            self._write_turns.turn(first=first),
            other_processes,
            self.engine.begin() as conn,
        ):
            yield conn

    @asynccontextmanager
    async def write_one_statement(self) -> AsyncIterator[AsyncConnection]:
        """A write of a single statement (the caller sends exactly one), going first as
        `write(first=True)` does. On PostgreSQL it runs in autocommit: one statement is one
        transaction on its own, all or nothing, and BEGIN and COMMIT would be two round trips
        more (`read` says what a round trip costs here). SQLite keeps its transaction."""
        if self.is_sqlite:
            async with self.write(first=True) as conn:
                yield conn
            return
        async with self.engine.connect() as conn:
            conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
            async with conn.begin():
                yield conn

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        """A read-only transaction; on SQLite it does not take the write lock.

        On PostgreSQL its statements run in autocommit, with no BEGIN and COMMIT around them:
        under READ COMMITTED (the level every transaction here runs at) each statement of a
        transaction takes its own snapshot anyway, and a read takes no lock, so what it sees
        is the same, two round trips fewer. A round trip costs the event loop more than its
        bytes: on a busy machine the write that sends a statement hands the CPU to the
        server's backend (measured under 200 streams on 2 cores: a quarter of the serving
        loop's busy samples were in `write` to PostgreSQL). Setting and resetting the level is
        the driver adapter's own flag, no statement."""
        async with self.engine.connect() as conn:
            if self.is_sqlite:
                conn = await conn.execution_options(sqlite_begin="DEFERRED")
            else:
                conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
            async with conn.begin():
                yield conn

    async def close(self) -> None:
        await self.engine.dispose()


async def ping(conn: AsyncConnection) -> None:
    """Ask the database a trivial question: raises if it cannot answer (health checks)."""
    await conn.execute(select(1))

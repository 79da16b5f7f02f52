"""The writers of every process on one SQLite file take turns through an OS file lock.

Within a process, writers already queue (`db._Turns`); between processes only SQLite's lock was
left, and its busy handler polls: a writer that finds the lock taken sleeps 1, 2, 5 ... up to
100 ms between tries, so one of two busy processes (`pressloop serve --processes 2`, or serve
and a worker) could wait a second or more for a lock that was free most of that time, while the
other took it again and again (measured, 200 streams on 2 serving processes: a group commit
published 1.7 s after its events, and the first tokens after them waited as long). A blocking
`flock` on a companion file (`<database>-writers.lock`) is woken by the kernel the moment the
holder lets go. SQLite's own lock stays under it, for any program that does not take this one
(the sqlite3 shell, an older Pressloop).

`flock` locks belong to one open file: each turn opens the file anew, so a turn abandoned while
it waited (a cancelled request) keeps its own lock and lets it go by closing, without touching
the lock a later turn of the same process holds. The file holds nothing; its mode is 0600.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import sqlite3
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from sqlalchemy.exc import OperationalError

from pressloop.private_files import PRIVATE_FILE

SUFFIX = "-writers.lock"


class FileWriteLock:
    def __init__(self, database: Path, *, timeout_s: float) -> None:
        self.path = database.with_name(database.name + SUFFIX)
        # As long as SQLite's busy handler would wait before "database is locked".
        self.timeout_s = timeout_s

    @asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        descriptor = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, PRIVATE_FILE)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            await self._wait(descriptor)  # given up: the file is closed there
        except BaseException:
            os.close(descriptor)
            raise
        try:
            yield
        finally:
            os.close(descriptor)  # lets the lock go

    async def _wait(self, descriptor: int) -> None:
        """Wait for the lock on a thread of its own (a blocking flock is not awaitable; a daemon
        thread, so that a process leaving while another holds the lock does not wait for it).
        Given up (the timeout, a cancel) before the lock came, the thread closes the file the
        moment it gets it; once handed over, the file is the waiter's to close."""
        loop = asyncio.get_running_loop()
        acquired: asyncio.Future[None] = loop.create_future()
        ownership = threading.Lock()
        handed, abandoned = False, False

        def settle(failed: OSError | None) -> None:
            if acquired.done():
                return  # given up meanwhile: the give-up closed the file
            if failed is None:
                acquired.set_result(None)
            else:
                acquired.set_exception(failed)

        def block() -> None:
            nonlocal handed
            failed: OSError | None = None
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX)
            except OSError as exc:
                failed = exc
            with ownership:
                if not abandoned:
                    try:
                        loop.call_soon_threadsafe(settle, failed)
                        handed = True
                        return
                    except RuntimeError:  # the loop is closed: nobody is waiting any more
                        pass
                os.close(descriptor)

        threading.Thread(target=block, name="pressloop-sqlite-writers", daemon=True).start()
        try:
            await asyncio.wait_for(acquired, self.timeout_s)
        except BaseException as exc:
            with ownership:
                abandoned = True
                if handed:
                    os.close(descriptor)
            if isinstance(exc, TimeoutError):
                # What SQLite's busy timeout raises (through SQLAlchemy) when it gives up.
                locked = sqlite3.OperationalError(
                    f"database is locked: another process held {self.path.name} for "
                    f"{self.timeout_s:g} s"
                )
                raise OperationalError("BEGIN IMMEDIATE", None, locked) from None
            raise

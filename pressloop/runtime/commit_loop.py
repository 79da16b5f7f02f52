"""The group commit's own event loop, on a thread of its own (PostgreSQL, when
`PRESSLOOP_COMMIT_THREAD=true`; off by default).

A transaction on asyncpg is a few round trips (BEGIN, the fenced updates, the events, the
notification, COMMIT), and each reply is read by the event loop that sent the statement. On the
process's one loop, shared with hundreds of runs' model calls and streams, every reply waited
for the loop's turn: measured under 200 streams (AMD EPYC, 2 cores), the loop was 30-80 ms late
most of the time and up to 350 ms, a group commit took up to 1.2 s, and a stream's first token
waited for the commit of the round before it (a part goes out only after every event before
it): first frame p99 585 ms. On a loop of its own, a commit waits only for the GIL (handed over
every few milliseconds), not for everything queued on the main loop.

That GIL is also its cost: each batch crosses between the threads twice, and each statement's
reply waits for the other thread to hand the GIL over. Once the main loop's long waits were gone
(a stream's first read, the pool's size, the collector's pauses), that cost more than it saved:
a quarter more CPU a turn with 1,000 turns at once, and a later first token under 200 streams
(docs/benchmarks.md, section 3d). So the default commits on the main loop; this stays for a
process whose main loop is late for other reasons (measure it: the first token's p99 and the
CPU a turn, with and without).

Only the commit moves: what the committer does with the outcome (settling the runs' futures,
publishing the events to this process's streams) stays on the caller's loop. SQLite keeps the
commit on the main loop: its writers of one process take turns there (`store/db.py`), and
aiosqlite already runs each statement on a thread of its own.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar

from pressloop.store.db import Database

T = TypeVar("T")

# The committer has one batch in flight at a time: one connection is all it uses.
ONE_BATCH_AT_A_TIME = 1


class CommitLoop:
    """An event loop on a daemon thread, with its own connection to `database`'s database
    (`self.database`); the thread starts on the first `run` and stops on `close`."""

    def __init__(self, database: Database) -> None:
        self.database = database.open_another(pool_size=ONE_BATCH_AT_A_TIME)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def _started(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            loop = asyncio.new_event_loop()
            thread = threading.Thread(
                target=loop.run_forever, name="pressloop-commits", daemon=True
            )
            thread.start()
            self._loop, self._thread = loop, thread
        return self._loop

    async def run(self, work: Callable[[Database], Awaitable[T]]) -> T:
        """`work` on the commit loop, given its database; its value or its error comes back
        here. Cancelling the caller cancels `work` (its transaction rolls back, as on one loop).
        """
        loop = self._started()

        async def on_commit_loop() -> T:
            return await work(self.database)

        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(on_commit_loop(), loop))

    async def close(self) -> None:
        """Close the connection and stop the thread (a later `run` starts them again)."""
        loop, thread = self._loop, self._thread
        self._loop, self._thread = None, None
        if loop is None or thread is None:
            return
        try:
            done = asyncio.run_coroutine_threadsafe(self.database.close(), loop)
            await asyncio.wrap_future(done)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            await asyncio.to_thread(thread.join)
            loop.close()

"""Usage counters, summed in memory and written at most once a second per process.

Every finishing run used to update the same two daily rows (the user's and the site's); with
hundreds of runs finishing together they queued on those row locks. A buffer turns that into
one upsert per process per interval. Budgets read the table, so they may lag by one interval.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict

from pressloop.clock import Monotonic
from pressloop.contracts import Usage
from pressloop.store import usage as usage_store
from pressloop.store.db import Database

Key = tuple[str, str, str]  # day, scope, subject


class UsageBuffer:
    def __init__(
        self, database: Database, *, interval_s: float, monotonic: Monotonic = time.monotonic
    ) -> None:
        self.database = database
        self.interval_s = interval_s
        self.monotonic = monotonic
        self._pending: dict[Key, list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0, 0])
        # What a flush is writing: not in `_pending` any more, not yet committed.
        self._flushing: dict[Key, list[int]] = {}
        self._flushed_at = float("-inf")
        self._lock = asyncio.Lock()

    def unwritten(self, day: str, scope: str, subject: str) -> Usage:
        """What this process counted for (day, scope, subject) that the table may not hold yet
        (budgets add it to the table's counters)."""
        counters = [0, 0, 0, 0]
        for source in (self._pending, self._flushing):
            found = source.get((day, scope, subject))
            for i in range(4):
                counters[i] += found[i] if found else 0
        return Usage(
            input_tokens=counters[0],
            output_tokens=counters[1],
            model_calls=counters[2],
            action_calls=counters[3],
        )

    def add(
        self, *, day: str, subjects: dict[str, str], usage: Usage, runs: int, refusals: int
    ) -> None:
        for scope, subject in subjects.items():
            counters = self._pending[(day, scope, subject)]
            for i, value in enumerate(
                (
                    usage.input_tokens,
                    usage.output_tokens,
                    usage.model_calls,
                    usage.action_calls,
                    runs,
                    refusals,
                )
            ):
                counters[i] += value

    def flush_due_in(self) -> float | None:
        """Seconds until the pending counters are due to be written (None: nothing pending)."""
        if not self._pending:
            return None
        return max(0.0, self.interval_s - (self.monotonic() - self._flushed_at))

    async def flush_if_due(self) -> None:
        if self._pending and self.monotonic() - self._flushed_at >= self.interval_s:
            await self.flush()

    async def flush(self) -> None:
        async with self._lock:
            pending, self._pending = self._pending, defaultdict(lambda: [0, 0, 0, 0, 0, 0])
            self._flushed_at = self.monotonic()
            if not pending:
                return
            self._flushing = pending
            try:
                async with self.database.write() as conn:
                    for (day, scope, subject), c in sorted(pending.items()):
                        await usage_store.add_usage(
                            conn,
                            day=day,
                            subjects={scope: subject},
                            usage=Usage(
                                input_tokens=c[0],
                                output_tokens=c[1],
                                model_calls=c[2],
                                action_calls=c[3],
                            ),
                            runs=c[4],
                            refusals=c[5],
                        )
            except Exception:
                # Keep the counts for the next flush rather than lose them.
                for key, counters in pending.items():
                    mine = self._pending[key]
                    for i, value in enumerate(counters):
                        mine[i] += value
                raise
            finally:
                self._flushing = {}

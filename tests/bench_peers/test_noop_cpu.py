"""The bench's no-op action with added CPU (PRESSLOOP_BENCH_NOOP_CPU_MS): each call spends its
own share, however many run side by side on the loop, and lets the loop run between slices."""

from __future__ import annotations

import asyncio
import time

from bench import noop_pack


def test_calls_side_by_side_each_spend_their_own_cpu() -> None:
    async def main() -> float:
        start = time.thread_time()
        await asyncio.gather(*(noop_pack._spend_cpu(0.005) for _ in range(10)))
        return time.thread_time() - start

    # The thread's clock counts every task on it: calls that read it as their own would end
    # together after one call's worth (5 ms) instead of ten.
    assert asyncio.run(main()) >= 10 * 0.005


def test_the_loop_runs_between_slices() -> None:
    async def main() -> int:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(ticker())
        await noop_pack._spend_cpu(0.01)
        task.cancel()
        return ticks

    # 10 ms in slices of 0.1 ms: the other task runs between them, about 100 times.
    assert asyncio.run(main()) >= 50

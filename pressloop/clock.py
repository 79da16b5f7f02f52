"""Time, injected: the real clock in production, a movable one in tests.

The bottom layer, beside contracts and errors: the runtime, the providers and the actions all take
their `Now` and `Sleep` from here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

Now = Callable[[], datetime]
# Seconds on a clock that never goes back (`time.monotonic`): for intervals, not dates.
Monotonic = Callable[[], float]
# Whatever a sleep's awaitable returns is ignored, so any async callable of seconds will do.
Sleep = Callable[[float], Awaitable[object]]


def utc_now() -> datetime:
    return datetime.now(UTC)


real_sleep: Sleep = asyncio.sleep

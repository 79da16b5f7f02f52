"""Retry delays: exponential backoff with full jitter (DESIGN.md section 8).

The one backoff for every retry loop (runs, model calls, WordPress requests), so they all count
the same way: `retry` is 1 for the first retry, the wait between the first attempt and the second.
"""

from __future__ import annotations

import random
from collections.abc import Callable


def full_jitter(
    retry: int, *, base_s: float, cap_s: float, rand: Callable[[], float] = random.random
) -> float:
    """Delay before retry number `retry` (1 for the first retry; lower counts as 1): uniform in
    [0, min(cap_s, base_s * 2 ** (retry - 1))].

    Full jitter (anywhere between 0 and the capped exponential step) so many clients hit by the
    same outage do not come back in lockstep.
    """
    ceiling = min(cap_s, base_s * 2.0 ** max(0, retry - 1))
    return rand() * ceiling

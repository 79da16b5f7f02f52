"""Retry delays: exponential backoff with full jitter (DESIGN.md section 8)."""

from __future__ import annotations

import random
from collections.abc import Callable


def full_jitter(
    attempt: int, *, base_s: float, cap_s: float, rand: Callable[[], float] = random.random
) -> float:
    """Delay before retry number `attempt` (1 for the first retry): uniform in [0, ceiling]."""
    ceiling = min(cap_s, base_s * float(2 ** max(0, attempt - 1)))
    return rand() * ceiling

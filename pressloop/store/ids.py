"""Identifiers: a readable prefix, then a part that sorts by creation time.

48 bits of milliseconds, a per-process counter (so ids made in the same millisecond by one
process still sort in creation order), then random bits (so processes never collide).
"""

from __future__ import annotations

import itertools
import os
import time

_counter = itertools.count()


def new_id(prefix: str) -> str:
    millis = int(time.time() * 1000) & 0xFFFFFFFFFFFF
    sequence = next(_counter) & 0xFFFF
    return f"{prefix}_{millis:012x}{sequence:04x}{os.urandom(6).hex()}"

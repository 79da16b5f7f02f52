"""Identifiers: a readable prefix and a time-ordered random part."""

from __future__ import annotations

import os
import time


def new_id(prefix: str) -> str:
    # 48 bits of milliseconds then 64 random bits: ids sort by creation time.
    millis = int(time.time() * 1000).to_bytes(6, "big").hex()
    return f"{prefix}_{millis}{os.urandom(8).hex()}"

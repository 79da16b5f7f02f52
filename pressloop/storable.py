"""Text that can be stored: no lone surrogate (no UTF-8 has one) and no NUL (PostgreSQL keeps
none, in text or in jsonb). JSON's escapes can spell either (`\\ud800`, `\\u0000`), and what the
model or an outside system (a site, a web page, an MCP server) sends is decoded into such text:
written as it came, the run's write failed, the turn failed with it, and each retry met the same
text until the run was dead. So what comes in from outside passes here first: a surrogate pair
becomes the character it encodes, anything else unstorable U+FFFD, the replacement character.
"""

from __future__ import annotations

import re
from typing import Any

REPLACEMENT = "\ufffd"
# What cannot be stored as it is: NUL, and surrogates (two that make a pair are joined by
# `storable`; the API's JSON decoder has joined every pair already, so `api/bounds.py` refuses any).
UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable(text: str) -> str:
    """`text` with each surrogate pair as the character it encodes, any other surrogate and NUL
    as U+FFFD."""
    if UNSTORABLE.search(text) is None:
        return text  # the usual case, at the cost of one scan
    text = text.replace("\x00", REPLACEMENT)
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def storable_value(value: Any) -> Any:
    """`value` (decoded JSON) with every string, keys too, storable."""
    if isinstance(value, str):
        return storable(value)
    if isinstance(value, dict):
        return {storable(str(k)): storable_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [storable_value(item) for item in value]
    return value

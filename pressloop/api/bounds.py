"""Bounds on what the HTTP API accepts, so bad input is a 422 and never reaches the database.

- Integers: ids, event numbers and intervals are INTEGER columns, whose largest value on
  PostgreSQL is `MAX_INT` (2**31 - 1); a larger one would fail in the driver.
- Identifiers in paths and queries: the shape Pressloop's ids have (`thr_0194...`, `default`).
- Text anywhere in a request (path, query, and the JSON body, keys included): no NUL (PostgreSQL's
  text and JSON cannot hold it) and no lone surrogate (it has no UTF-8 encoding). JSON numbers are
  finite (JSON has no NaN or Infinity, though Python's parser reads them) and JSON nests at most
  `MAX_DEPTH` deep.
"""

from __future__ import annotations

import math
from typing import Annotated

from fastapi import Path, Query, Request

from pressloop.errors import InvalidRequest
from pressloop.storable import UNSTORABLE

MAX_INT = 2**31 - 1
MAX_DEPTH = 32
ID_MAX_LENGTH = 64
ID_PATTERN = r"^[A-Za-z0-9_-]+$"


def whole_number_pattern(limit: int) -> str:
    """A regex for the decimal numbers 0..`limit`, without leading zeros: how a header holding a
    number is declared (headers are text, so `type: integer` would not describe what is sent)."""
    digits = str(limit)
    alternatives = ["0"]
    if len(digits) > 1:
        alternatives.append(f"[1-9][0-9]{{0,{len(digits) - 2}}}")
    for i, digit in enumerate(digits):
        low, rest = (1 if i == 0 else 0), len(digits) - i - 1
        if int(digit) > low:
            tail = f"[0-9]{{{rest}}}" if rest else ""
            alternatives.append(f"{digits[:i]}[{low}-{int(digit) - 1}]{tail}")
    alternatives.append(digits)
    return f"^({'|'.join(alternatives)})$"


SEQ_PATTERN = whole_number_pattern(MAX_INT)
# A stream position (an SSE `id`, sent back as Last-Event-ID): an event's seq `N`, or `N.k`
# after a provisional text delta: event N and the first k parts (1 or more) of event N + 1.
EVENT_ID_PATTERN = f"^({SEQ_PATTERN[1:-1]})(\\.[1-9][0-9]{{0,8}})?$"

Id = Annotated[
    str,
    Path(
        min_length=1,
        max_length=ID_MAX_LENGTH,
        pattern=ID_PATTERN,
        description="An id as Pressloop makes them: `thr_...`, `run_...`, `default`.",
    ),
]
IdFilter = Annotated[str | None, Query(min_length=1, max_length=ID_MAX_LENGTH, pattern=ID_PATTERN)]
SeqNumber = Annotated[int, Path(ge=1, le=MAX_INT)]


def text_problem(text: str) -> str | None:
    """Why `text` cannot be stored, or None."""
    found = UNSTORABLE.search(text)
    if found is None:
        return None
    if found.group() == "\x00":
        return "text must not contain a NUL character (\\u0000)"
    return f"text must not contain a lone surrogate (\\u{ord(found.group()):04x})"


def json_problem(value: object) -> str | None:
    """Why a parsed JSON value cannot be stored (`where: why`), or None. Iterative, so a deeply
    nested value cannot exhaust the stack."""
    pending: list[tuple[object, str, int]] = [(value, "", 0)]
    while pending:
        item, where, depth = pending.pop()
        problem: str | None = None
        if isinstance(item, str):
            problem = text_problem(item)
        elif isinstance(item, float) and not math.isfinite(item):
            problem = "numbers must be finite (JSON has no NaN or Infinity)"
        elif isinstance(item, dict | list) and depth >= MAX_DEPTH:
            problem = f"JSON may nest at most {MAX_DEPTH} levels deep"
        elif isinstance(item, dict):
            for key, inner in item.items():
                key_problem = text_problem(key) if isinstance(key, str) else None
                if key_problem:
                    return f"{_join(where, '(a key)')}: {key_problem}"
                pending.append((inner, _join(where, str(key)), depth + 1))
        elif isinstance(item, list):
            pending.extend((inner, _join(where, str(i)), depth + 1) for i, inner in enumerate(item))
        if problem:
            return f"{where}: {problem}" if where else problem
    return None


def _join(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


async def plain_text(request: Request) -> None:
    """An app-wide dependency: path and query values must be storable text (a `%00` decodes to a
    NUL, which PostgreSQL refuses)."""
    for where, items in (
        ("path", list(request.path_params.items())),
        ("query", request.query_params.multi_items()),
    ):
        for name, value in items:
            problem = text_problem(name)
            if problem is None and isinstance(value, str):
                problem = text_problem(value)
            if problem:
                raise InvalidRequest(f"{where}.{name}: {problem}")

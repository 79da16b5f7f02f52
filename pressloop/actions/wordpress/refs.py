"""References as people give them: an id, or a title, a name, a login, an email, some words.

A small model rarely knows ids; it knows what the person said ("the Spring Sale post", "Bob's
comment"). Each reference field accepts an id or such words (`Ref`), and the lookup (`lookup`)
finds the one object they name, or fails with the candidates: never a guess. Matching is exact
first (case-insensitive, HTML entities and extra spaces ignored), then a unique partial match.

An action resolves its reference once per call (`Pinned`): the snapshot for undo, the change
itself and the immediate check after an unclear answer all act on the same object, even if a
title changes in between.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterable
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from pressloop.errors import ActionError

T = TypeVar("T")

RefId = Annotated[int, Field(gt=0)]
RefText = Annotated[str, Field(min_length=1, max_length=200)]
Ref = RefId | RefText
SHOWN = 8  # candidates named in a "which one?" answer
_QUOTES = "\"'“”‘’«»`"


class Pinned(BaseModel):
    """Params whose references are resolved once per call (see the module's notes)."""

    model_config = ConfigDict(extra="forbid")
    _pins: dict[str, Any] = PrivateAttr(default_factory=dict)

    def pinned(self, key: str) -> Any:
        return self._pins.get(key)

    def pin(self, key: str, value: Any) -> None:
        self._pins[key] = value


def as_id(ref: int | str) -> int | None:
    """The id a reference gives: 12, "12" or "#12"; None for words."""
    if isinstance(ref, int):
        return ref
    text = ref.strip().removeprefix("#").strip()
    return int(text) if text.isdigit() and int(text) > 0 else None


def norm(text: Any) -> str:
    """Text as compared: entities decoded, case folded, spaces collapsed, quotes around dropped."""
    plain = html.unescape(str(text or ""))
    return " ".join(plain.split()).strip(_QUOTES).strip().casefold()


def matching(ref: str, items: Iterable[T], names: Callable[[T], Iterable[Any]]) -> list[T]:
    """The items one of whose names is `ref` (case-insensitive); else those containing it."""
    wanted = norm(ref)
    pool = list(items)
    if not wanted:
        return []
    exact = [item for item in pool if any(norm(n) == wanted for n in names(item))]
    if exact:
        return exact
    return [item for item in pool if any(wanted in norm(n) for n in names(item) if n)]


def distinct(items: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Items by id, each once, in order."""
    return list({item["id"]: item for item in items if "id" in item}.values())


def short(text: Any, limit: int = 60) -> str:
    plain = " ".join(html.unescape(str(text or "")).split())
    return plain if len(plain) <= limit else plain[: limit - 3] + "..."


def which_one(what: str, field: str, ref: str, candidates: list[str]) -> ActionError:
    """The answer to an ambiguous reference: the candidates, and how to name one."""
    shown = "; ".join(candidates[:SHOWN])
    more = f"; and {len(candidates) - SHOWN} more" if len(candidates) > SHOWN else ""
    return ActionError(
        f"{len(candidates)} {what}s match {ref!r}, which one? {shown}{more}. Nothing was done: "
        f"call again with {field} set to the id of the one meant (or ask the person)."
    )


def day(value: Any) -> str:
    """The date part of a WordPress date ("2024-03-01T10:00:00")."""
    return str(value or "")[:10] or "no date"

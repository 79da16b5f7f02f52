"""Small pieces the tasks are written with: which changes a request allows, how to find what a
judge looks for, and the scripted answers of the self-test."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from bench.tasks.model import World
from bench.tasks.state import Change

Rule = Callable[[Change, World], bool]
Check = Callable[[World], str | None]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        return a.strip().lower() == b.strip().lower()
    return bool(a == b)


def touch(kind: str, fact: str | None = None, *fields: str) -> Rule:
    """A change of `kind` (of the record the fact names, if given; of these fields, if given;
    "+" created, "-" deleted)."""

    def rule(change: Change, world: World) -> bool:
        if change.kind != kind:
            return False
        if fact is not None and change.key != world.facts[fact]:
            return False
        return not fields or change.field in fields

    return rule


def new(kind: str, **where: Any) -> Rule:
    """A record of `kind` created with these field values."""

    def rule(change: Change, world: World) -> bool:
        return (
            change.kind == kind
            and change.field == "+"
            and all(_same((change.after or {}).get(k), v) for k, v in where.items())
        )

    return rule


def allow(*rules: Rule) -> Callable[[Change, World], bool]:
    def allowed(change: Change, world: World) -> bool:
        return any(rule(change, world) for rule in rules)

    return allowed


def created(world: World, kind: str, **where: Any) -> list[dict[str, Any]]:
    """The records of `kind` made during the run with these fields."""
    return [
        c.after
        for c in world.changes
        if c.kind == kind
        and c.field == "+"
        and all(_same((c.after or {}).get(k), v) for k, v in where.items())
    ]


def text(value: Any) -> str:
    """Block markup and HTML reduced to words."""
    return re.sub(r"<[^>]+>", " ", str(value or "")).strip()


def has(value: Any, *words: str) -> bool:
    low = text(value).lower()
    return all(w.lower() in low for w in words)


def record(world: World, kind: str, fact: str) -> dict[str, Any]:
    """The record a fact names, after the run ({} when it is gone)."""
    return world.after.get(kind, world.facts[fact]) or {}


# -- the self-test's scripted answers -----------------------------------------------------------


def call(action: str, /, **arguments: Any) -> dict[str, Any]:
    """One tool call. "$id" in an argument stands for the id in the last action result."""
    return {"tool_calls": [{"name": action, "arguments": arguments}]}


def calls(*pairs: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"tool_calls": [{"name": n, "arguments": a} for n, a in pairs]}


def say(words: str) -> dict[str, Any]:
    return {"text": words}

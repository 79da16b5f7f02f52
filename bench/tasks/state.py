"""The site as a judge sees it: everything a request could change, read over REST as the admin,
and what changed between two readings.

Kinds: post, page, comment, user, category, tag, media, setting (one record, "site"), plugin
(by file id) and theme (by stylesheet). Fields that move on their own (dates, counts, slugs,
rendered HTML) are left out, so a change is always something someone did.
"""

from __future__ import annotations

import html
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from pressloop.actions.wordpress.client import WordPressClient

POST_STATUSES = "publish,future,draft,pending,private,trash"


def _raw(value: Any) -> Any:
    if isinstance(value, dict):
        return value.get("raw", value.get("rendered"))
    return value


@dataclass(frozen=True)
class Change:
    kind: str
    key: Any
    field: str  # "+" created, "-" deleted, else the field that changed
    before: Any = None
    after: Any = None

    def describe(self) -> str:
        if self.field == "+":
            return f"{self.kind} {self.key} created ({_short(self.after)})"
        if self.field == "-":
            return f"{self.kind} {self.key} deleted ({_short(self.before)})"
        return f"{self.kind} {self.key} {self.field}: {_short(self.before)} -> {_short(self.after)}"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


@dataclass
class State:
    records: dict[str, dict[Any, dict[str, Any]]] = field(default_factory=dict)

    def of(self, kind: str) -> dict[Any, dict[str, Any]]:
        return self.records.get(kind, {})

    def get(self, kind: str, key: Any) -> dict[str, Any] | None:
        return self.of(kind).get(key)

    def find(self, kind: str, **wanted: Any) -> list[tuple[Any, dict[str, Any]]]:
        """Records whose fields equal `wanted` (strings compared without case or edge spaces)."""

        def same(a: Any, b: Any) -> bool:
            if isinstance(a, str) and isinstance(b, str):
                return a.strip().lower() == b.strip().lower()
            return bool(a == b)

        return [
            (key, record)
            for key, record in self.of(kind).items()
            if all(same(record.get(k), v) for k, v in wanted.items())
        ]

    def one(self, kind: str, **wanted: Any) -> tuple[Any, dict[str, Any]] | None:
        found = self.find(kind, **wanted)
        return found[0] if len(found) == 1 else None

    def ids(self, kind: str) -> set[Any]:
        return set(self.of(kind))


async def _all(client: WordPressClient, path: str, params: dict[str, Any]) -> list[Any]:
    out: list[Any] = []
    page = 1
    while True:
        response = await client.request(
            "GET", path, params={**params, "per_page": 100, "page": page, "context": "edit"}
        )
        out += response.data or []
        if not response.data or len(response.data) < 100:
            return out
        page += 1


async def read_state(client: WordPressClient) -> State:
    state = State()
    for kind, path in (("post", "/wp/v2/posts"), ("page", "/wp/v2/pages")):
        state.records[kind] = {
            p["id"]: {
                "title": _raw(p.get("title")),
                "status": p.get("status"),
                "content": (_raw(p.get("content")) or "").strip(),
                "excerpt": (_raw(p.get("excerpt")) or "").strip(),
                "categories": sorted(p.get("categories", [])),
                "tags": sorted(p.get("tags", [])),
                "author": p.get("author"),
            }
            for p in await _all(client, path, {"status": POST_STATUSES})
        }
    comments: dict[Any, dict[str, Any]] = {}
    for status in ("all", "spam", "trash"):
        for c in await _all(client, "/wp/v2/comments", {"status": status}):
            comments[c["id"]] = {
                "post": c.get("post"),
                "parent": c.get("parent"),
                "status": c.get("status"),
                "author_name": c.get("author_name"),
                "content": (_raw(c.get("content")) or "").strip(),
            }
    state.records["comment"] = comments
    state.records["user"] = {
        u["id"]: {
            "login": u.get("username"),
            "email": u.get("email"),
            "name": u.get("name"),
            "roles": sorted(u.get("roles", [])),
        }
        for u in await _all(client, "/wp/v2/users", {})
    }
    for kind, path in (("category", "/wp/v2/categories"), ("tag", "/wp/v2/tags")):
        state.records[kind] = {
            t["id"]: {
                "name": html.unescape(str(t.get("name", ""))),
                "parent": t.get("parent", 0),
                "description": t.get("description", ""),
            }
            for t in await _all(client, path, {"hide_empty": "false"})
        }
    state.records["media"] = {
        m["id"]: {
            "title": _raw(m.get("title")),
            "alt_text": m.get("alt_text"),
            "caption": (_raw(m.get("caption")) or "").strip(),
            "file": (m.get("source_url") or "").rsplit("/", 1)[-1],
        }
        for m in await _all(client, "/wp/v2/media", {})
    }
    settings = await client.get("/wp/v2/settings", context="")
    # WordPress keeps the title and tagline HTML-escaped ("A &amp; B"): compared as shown.
    state.records["setting"] = {
        "site": {k: html.unescape(v) if isinstance(v, str) else v for k, v in settings.items()}
    }
    state.records["plugin"] = {
        p["plugin"]: {"name": _raw(p.get("name")), "status": p.get("status")}
        for p in await client.get("/wp/v2/plugins")
    }
    state.records["theme"] = {
        t["stylesheet"]: {"name": _raw(t.get("name")), "status": t.get("status")}
        for t in await client.get("/wp/v2/themes", context="")
    }
    return state


def diff(before: State, after: State) -> list[Change]:
    return list(_changes(before, after))


def _changes(before: State, after: State) -> Iterator[Change]:
    for kind in sorted(set(before.records) | set(after.records)):
        old, new = before.of(kind), after.of(kind)
        for key in sorted(set(old) | set(new), key=str):
            if key not in old:
                yield Change(kind, key, "+", None, new[key])
            elif key not in new:
                yield Change(kind, key, "-", old[key], None)
            else:
                for name in sorted(set(old[key]) | set(new[key])):
                    if old[key].get(name) != new[key].get(name):
                        yield Change(kind, key, name, old[key].get(name), new[key].get(name))

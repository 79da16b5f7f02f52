"""Finding the object a reference names (`refs`): a post or page by id or title, a user by id,
login, email or display name, a comment by id, its author's name or words of its text, a
category or tag by id, name or slug.

The lookup covers every status (published, scheduled, drafts, pending, private; comments held
or marked spam too); the trash only where an action asks for it (deleting for good), and then
only when nothing outside it matches. Several matches: an ActionError naming the candidates (id,
title or name, status, date), so the model or the person picks one; nothing is changed.
"""

from __future__ import annotations

import html
import re
from typing import Any

from pressloop.actions.wordpress.client import WordPressClient
from pressloop.actions.wordpress.common import rendered
from pressloop.actions.wordpress.post_params import LIVE_STATUSES, ROUTES
from pressloop.actions.wordpress.refs import as_id, day, distinct, matching, norm, short, which_one
from pressloop.errors import ActionError

_PER_PAGE = 100

# -- posts and pages ------------------------------------------------------------------------------


async def post_by_id(
    client: WordPressClient, kind: str, post_id: int, *, either: bool = False
) -> dict[str, Any]:
    """The post in edit context; `either`: a page when it is not a post (or the reverse)."""
    other = "page" if kind == "post" else "post"
    try:
        found = await client.get(f"{ROUTES[kind]}/{post_id}")
    except ActionError as error:
        if "rest_post_invalid_id" not in error.message:
            raise
        if either:
            try:
                return await post_by_id(client, other, post_id)
            except ActionError:
                pass
        raise ActionError(
            f"there is no {kind} with id {post_id} (if it is a {other}, use type "
            f'"{other}"; list_posts finds ids)'
        ) from error
    if not isinstance(found, dict):
        raise ActionError(f"WordPress answered GET {ROUTES[kind]}/{post_id} with no post")
    return found


def post_line(post: dict[str, Any]) -> str:
    title = short(rendered(post.get("title")))
    where = f"{post.get('type')}, {post.get('status')}, {day(post.get('date'))}"
    return f'#{post.get("id")} "{title}" ({where})'


async def _titled(
    client: WordPressClient, kind: str, ref: str, statuses: str
) -> list[dict[str, Any]]:
    def title(post: dict[str, Any]) -> list[Any]:
        return [rendered(post.get("title"))]

    query: dict[str, Any] = {"status": statuses, "per_page": _PER_PAGE}
    hits = await client.get(ROUTES[kind], {**query, "search": norm(ref)})
    found = matching(ref, hits, title)
    if not found:  # WordPress's search reads "-word" as "without word": the newest ones too
        recent = await client.get(ROUTES[kind], {**query, "orderby": "modified", "order": "desc"})
        found = matching(ref, recent, title)
    return distinct(found)


async def find_post(
    client: WordPressClient, ref: int | str, kind: str, *, either: bool, trash: bool = False
) -> dict[str, Any]:
    """The post or page `ref` names: an id, or a title (exact, then a unique partial match),
    in any status but trash (`trash`: the trash too, when nothing else matches). `either`: the
    type was not given, so a page will do when no post matches (or the reverse)."""
    post_id = as_id(ref)
    if post_id is not None:
        try:
            return await post_by_id(client, kind, post_id, either=either)
        except ActionError:
            if isinstance(ref, int):
                raise
            if found := await _titles(client, str(ref), kind, either=either, trash=trash):
                return _one(found, str(ref))
            raise
    text = str(ref)
    found = await _titles(client, text, kind, either=either, trash=trash)
    if not found and (newest := _NEWEST.match(norm(text))):
        # "the latest post", "my newest draft": what people call it. Published unless a draft
        # is named; a post or page actually titled so was looked for first.
        status = "draft" if newest.group("draft") else "publish"
        query: dict[str, Any] = {
            "status": status,
            "per_page": 1,
            "orderby": "date",
            "order": "desc",
        }
        found = await client.get(ROUTES[kind], query)
    if not found:
        kinds = "post or page" if either else kind
        where = "in any status, trash included" if trash else "in any status but the trash"
        raise ActionError(
            f"no {kinds} titled {text!r} ({where}); list_posts with search finds posts"
        )
    return _one(found, text)


_NEWEST = re.compile(
    r"^(?:the |my )?(?:latest|newest|last|most recent)(?: (?:published|(?P<draft>draft)))?"
    r"(?: (?:post|page|one))?$"
)


async def _titles(
    client: WordPressClient, ref: str, kind: str, *, either: bool, trash: bool
) -> list[dict[str, Any]]:
    kinds = [kind, "page" if kind == "post" else "post"] if either else [kind]
    for statuses in [LIVE_STATUSES, "trash"] if trash else [LIVE_STATUSES]:
        for each in kinds:
            if found := await _titled(client, each, ref, statuses):
                return found
    return []


def _one(found: list[dict[str, Any]], ref: str) -> dict[str, Any]:
    if len(found) == 1:
        return found[0]
    what = str(found[0].get("type") or "post")  # one type: pages are looked at only after posts
    raise which_one(what, "post", ref, [post_line(p) for p in found])


# -- users ----------------------------------------------------------------------------------------


def user_line(user: dict[str, Any]) -> str:
    roles = ", ".join(user.get("roles") or []) or "no role"
    return (
        f'#{user.get("id")} {short(user.get("username"), 40)} "{short(user.get("name"), 40)}" '
        f"<{short(user.get('email'), 60)}> ({roles}, registered {day(user.get('registered_date'))})"
    )


async def find_user(client: WordPressClient, ref: int | str) -> dict[str, Any]:
    """The user `ref` names: an id, or their login, email or display name (exactly, any case;
    then a unique partial match). Two users matching: the candidates, never a guess."""
    user_id = as_id(ref)
    missing: ActionError | None = None
    if user_id is not None:
        try:
            found: dict[str, Any] = await client.get(f"/wp/v2/users/{user_id}")
            return found
        except ActionError as error:
            if "rest_user_invalid_id" not in error.message:
                raise
            missing = ActionError(f"there is no user with id {user_id} (list_users finds users)")
            missing.__cause__ = error
            if isinstance(ref, int):
                raise missing from error
    text = str(ref)
    users = await client.get("/wp/v2/users", {"search": norm(text), "per_page": _PER_PAGE})
    found_users = matching(
        text, users, lambda u: [u.get("username"), u.get("email"), u.get("name"), u.get("slug")]
    )
    if not found_users:
        if missing is not None:
            raise missing
        raise ActionError(
            f"no user with login, email or name {text!r}; list_users with search finds users"
        )
    if len(found_users) > 1:
        raise which_one("user", "user", text, [user_line(u) for u in found_users])
    one: dict[str, Any] = found_users[0]
    return one


# -- comments -------------------------------------------------------------------------------------


def comment_text(item: dict[str, Any]) -> str:
    return re.sub(r"<[^>]*>", " ", str(rendered(item.get("content")) or ""))


def comment_line(item: dict[str, Any]) -> str:
    return (
        f'#{item.get("id")} by "{short(item.get("author_name"), 40)}" on post #{item.get("post")} '
        f"({item.get('status')}, {day(item.get('date'))})"
    )


async def comment_by_id(client: WordPressClient, comment_id: int) -> dict[str, Any]:
    try:
        found: dict[str, Any] = await client.get(f"/wp/v2/comments/{comment_id}")
    except ActionError as error:
        if "rest_comment_invalid_id" not in error.message:
            raise
        raise ActionError(
            f"there is no comment with id {comment_id} (list_comments finds comments)"
        ) from error
    return found


def _comments_matching(ref: str, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """By its author's name (exactly), else by words of its text, else by part of the name."""
    wanted = norm(ref)
    by_author = [c for c in items if norm(c.get("author_name")) == wanted]
    if by_author:
        return by_author
    words = wanted.split()
    by_text = [c for c in items if words and all(w in norm(comment_text(c)) for w in words)]
    if by_text:
        return by_text
    return [c for c in items if wanted and wanted in norm(c.get("author_name"))]


async def find_comment(
    client: WordPressClient, ref: int | str, *, trash: bool = False, not_text: str | None = None
) -> dict[str, Any]:
    """The comment `ref` names: an id, its author's name or words of its text, in any status
    but trash (`trash`: the trash too, when nothing else matches). `not_text`: leave out
    comments with exactly this text (the reply this step may already have posted)."""
    comment_id = as_id(ref)
    if comment_id is not None:
        return await comment_by_id(client, comment_id)
    text = str(ref)
    query: dict[str, Any] = {"status": "any", "per_page": _PER_PAGE}
    skip = norm(not_text) if not_text else None

    def usable(items: list[dict[str, Any]], in_trash: bool) -> list[dict[str, Any]]:
        return [
            c
            for c in items
            if (c.get("status") == "trash") == in_trash and norm(comment_text(c)) != skip
        ]

    searched = await client.get("/wp/v2/comments", {**query, "search": norm(text)})
    recent: list[dict[str, Any]] | None = None
    for in_trash in [False, True] if trash else [False]:
        found = _comments_matching(text, usable(searched, in_trash))
        if not found:
            if recent is None:
                recent = await client.get("/wp/v2/comments", query)
            found = _comments_matching(text, usable(recent, in_trash))
        found = distinct(found)
        if len(found) == 1:
            return found[0]
        if found:
            raise which_one("comment", "comment", text, [comment_line(c) for c in found])
    raise ActionError(
        f"no comment by {text!r} or with those words (trash left out); list_comments finds them"
    )


# -- categories and tags --------------------------------------------------------------------------

TERM_ROUTES = {"category": "/wp/v2/categories", "tag": "/wp/v2/tags"}
_LISTS = {"category": "list_categories", "tag": "list_tags"}


def term_line(term: dict[str, Any]) -> str:
    name = short(html.unescape(str(term.get("name", ""))), 60)
    return f'#{term.get("id")} "{name}" (slug {term.get("slug")}, {term.get("count", 0)} posts)'


async def term_by_id(client: WordPressClient, taxonomy: str, term_id: int) -> dict[str, Any]:
    try:
        term = await client.get(f"{TERM_ROUTES[taxonomy]}/{term_id}")
    except ActionError as error:
        if "rest_term_invalid" not in error.message:
            raise
        raise ActionError(
            f"there is no {taxonomy} with id {term_id} ({_LISTS[taxonomy]} finds ids)"
        ) from error
    if not isinstance(term, dict):
        raise ActionError(f"WordPress answered with no {taxonomy} for id {term_id}")
    return term


async def find_term(client: WordPressClient, taxonomy: str, ref: int | str) -> dict[str, Any]:
    """The category or tag `ref` names: an id, or its name or slug (exactly, any case). Only
    close names: none is taken, they are named in the error."""
    term_id = as_id(ref)
    if term_id is not None:
        return await term_by_id(client, taxonomy, term_id)
    text = str(ref)
    words = norm(text)
    found: list[dict[str, Any]] = []
    # WordPress stores names HTML-escaped ("A &amp; B") and searches them as stored.
    for search in dict.fromkeys([html.escape(words, quote=False), words]):
        query: dict[str, Any] = {"search": search, "per_page": _PER_PAGE, "hide_empty": False}
        found += await client.get(TERM_ROUTES[taxonomy], query)
    terms = distinct(found)
    exact = [t for t in terms if words in (norm(t.get("name")), norm(t.get("slug")))]
    if len(exact) == 1:
        return exact[0]
    if exact:
        raise which_one(taxonomy, taxonomy, text, [term_line(t) for t in exact])
    close = "; ".join(term_line(t) for t in terms[:8])
    create = "create_category" if taxonomy == "category" else "create_tag"
    raise ActionError(
        f"no {taxonomy} named {text!r}"
        + (f"; close ones: {close}" if close else "")
        + f". {_LISTS[taxonomy]} lists them; {create} makes a new one, only when the person "
        f"asked for a new {taxonomy}: otherwise leave it out"
    )


async def term_ids(
    client: WordPressClient, taxonomy: str, refs: list[int | str] | None
) -> list[int] | None:
    """Ids for a list of term references (ids pass through as given)."""
    if refs is None:
        return None
    ids: list[int] = []
    for ref in refs:
        ids.append(
            ref if isinstance(ref, int) else int((await find_term(client, taxonomy, ref))["id"])
        )
    return list(dict.fromkeys(ids))


# -- media -----------------------------------------------------------------------------------------


async def find_media(client: WordPressClient, ref: int | str) -> dict[str, Any]:
    """The media item `ref` names: an id, or its title or file name (exact, then a unique
    partial match). Several: the candidates, never a guess."""
    item_id = as_id(ref)
    if item_id is not None:
        return dict(await client.get(f"/wp/v2/media/{item_id}", {"context": "edit"}))
    text = str(ref)

    def names(item: dict[str, Any]) -> list[Any]:
        source = str(item.get("source_url") or "").rsplit("/", 1)[-1]
        return [rendered(item.get("title")), item.get("slug"), source, source.rsplit(".", 1)[0]]

    query: dict[str, Any] = {"per_page": _PER_PAGE, "context": "edit"}
    found = matching(text, await client.get("/wp/v2/media", {**query, "search": norm(text)}), names)
    if not found:
        recent = await client.get("/wp/v2/media", {**query, "orderby": "date", "order": "desc"})
        found = matching(text, recent, names)
    found = distinct(found)
    if len(found) == 1:
        return dict(found[0])
    if found:
        lines = [
            f"#{m['id']} {short(rendered(m.get('title')))} ({m.get('source_url')})" for m in found
        ]
        raise which_one("media item", "media", text, lines)
    raise ActionError(f"no media item titled or named {text!r}; list_media finds them")

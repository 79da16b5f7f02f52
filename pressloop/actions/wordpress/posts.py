"""Post and page actions: list, get, create (Gutenberg blocks), update, publish, trash, delete.

One implementation for both post types: every action takes `type` ("post" or "page", default
"post"), so the model learns one set of names. Content is Gutenberg block markup; plain text or
bare HTML is wrapped into blocks (`blocks()`), so what the agent writes edits cleanly.

Undo: update, publish and trash put back the fields read before (the snapshot kept with the
ledger intent). `delete_post` removes a post for good: no undo. Creating lives in `post_create`.
"""

from __future__ import annotations

from typing import Any

from pressloop.actions.registry import ActionResult, ActionServices, ActionSpec
from pressloop.actions.wordpress.blocks import blocks
from pressloop.actions.wordpress.client import WordPressClient
from pressloop.actions.wordpress.common import rendered, site
from pressloop.actions.wordpress.lookup import find_post, post_by_id, term_ids
from pressloop.actions.wordpress.post_params import (
    CONTENT_LIMIT,
    LIVE_STATUSES,
    ROUTES,
    GetPostParams,
    ListPostsParams,
    PostRefParams,
    UpdatePostParams,
)
from pressloop.actions.wordpress.refs import as_id
from pressloop.contracts import ActionContext, Risk
from pressloop.errors import ActionError, SiteError

# -- reading posts --------------------------------------------------------------------------------


def route(kind: str, post_id: int | None = None) -> str:
    return ROUTES[kind] if post_id is None else f"{ROUTES[kind]}/{post_id}"


def no_terms_on_pages(kind: str, categories: Any, tags: Any) -> None:
    if kind == "page" and (categories is not None or tags is not None):
        raise ActionError("pages have no categories or tags: leave them out for a page")


async def fetch(client: WordPressClient, kind: str, post_id: int) -> dict[str, Any]:
    """The post in edit context, or a clear error naming what was not found."""
    return await post_by_id(client, kind, post_id)


async def target(
    client: WordPressClient, params: GetPostParams | PostRefParams | UpdatePostParams,
    *, trash: bool = False,
) -> dict[str, Any]:  # fmt: skip
    """The post `params.post` names, read now. Resolved once per call (`refs.Pinned`): the
    snapshot, the change and its check act on the same post. `type` not given, or a title that
    names no item of the type given (a small model wrote "page" for a draft post): the other
    type will do, its own type looked at first. An id is taken as given."""
    pinned = params.pinned("post")
    if pinned is not None:
        return await post_by_id(client, pinned[0], pinned[1])
    either = "type" not in params.model_fields_set or as_id(params.post) is None
    post = await find_post(client, params.post, params.type, either=either, trash=trash)
    params.pin("post", (str(post.get("type") or params.type), int(post["id"])))
    return post


def brief(post: dict[str, Any]) -> dict[str, Any]:
    """What the model needs to act on a post, without its body."""
    out = {
        "id": post.get("id"),
        "type": post.get("type"),
        "title": rendered(post.get("title")),
        "status": post.get("status"),
        "date": post.get("date"),
        "modified": post.get("modified"),
        "link": post.get("link"),
    }
    for terms in ("categories", "tags"):
        if terms in post:
            out[terms] = post[terms]
    return out


def full(post: dict[str, Any]) -> dict[str, Any]:
    content = rendered(post.get("content")) or ""
    out = {**brief(post), "excerpt": rendered(post.get("excerpt")) or ""}
    out["content"] = content[:CONTENT_LIMIT]
    if len(content) > CONTENT_LIMIT:
        out["content_truncated_at"] = CONTENT_LIMIT
    return out


def label(post: dict[str, Any]) -> str:
    return f"{post.get('type', 'post')} #{post.get('id')} {rendered(post.get('title'))!r}"


_ANY = LIVE_STATUSES.split(",")


async def list_posts(
    params: ListPostsParams, context: ActionContext, services: ActionServices
) -> ActionResult:
    client = site(services)
    statuses = _ANY if params.status == "any" else [params.status]
    query: dict[str, Any] = {
        "per_page": params.per_page,
        "page": params.page,
        "status": ",".join(statuses),
        "orderby": "date" if not params.search else "relevance",
        "order": "desc",
    }
    if params.search:
        query["search"] = params.search
    if params.categories:
        no_terms_on_pages(params.type, params.categories, None)
        query["categories"] = await term_ids(client, "category", params.categories)
    try:
        response = await client.request("GET", route(params.type), params=query)
    except SiteError as refused:
        # A user who may not see others' drafts is refused the whole list: published ones then.
        # Not for wrong credentials: WordPress then reads the call as an anonymous visitor's,
        # and the owner must hear of it rather than get the public posts.
        if params.status != "any" or refused.signed_out or refused.status not in (400, 403):
            raise
        statuses = ["publish"]
        response = await client.request(
            "GET", route(params.type), params=query | {"status": "publish"}
        )
    items = [brief(p) for p in response.data or []]
    total = response.total if response.total is not None else len(items)
    plural = params.type + "s"
    left_out = "trash" if "trash" not in statuses else "none"
    if statuses == ["publish"] and params.status == "any":
        left_out = "drafts, pending, scheduled and private ones (this user may not see them), trash"
    return ActionResult(
        # The order said in words: "which is the latest?" is read off the first item.
        content={"total": total, "page": params.page, "statuses": statuses,
                 "left_out": left_out,
                 "order": "best match first" if params.search else "newest first",
                 plural: items},
        summary=f"listed {len(items)} of {total} {plural} ({', '.join(statuses)})",
        untrusted=True,
    )  # fmt: skip


async def get_post(
    params: GetPostParams, context: ActionContext, services: ActionServices
) -> ActionResult:
    post = await target(site(services), params)
    return ActionResult(content=full(post), summary=f"read {label(post)}", untrusted=True)


# -- update and publish ---------------------------------------------------------------------------

_FIELDS = ("title", "content", "add_content", "excerpt", "status", "categories", "tags")


def _asked(params: UpdatePostParams) -> dict[str, Any]:
    asked = {name: getattr(params, name) for name in _FIELDS if getattr(params, name) is not None}
    if not asked:
        raise ActionError("nothing to change: give at least one of " + ", ".join(_FIELDS))
    return asked


async def _changes(
    client: WordPressClient, params: UpdatePostParams, post: dict[str, Any]
) -> dict[str, Any]:
    """The fields to write, for `post` (its type decides whether terms are allowed)."""
    changes = _asked(params)
    no_terms_on_pages(str(post.get("type")), params.categories, params.tags)
    if "content" in changes and "add_content" in changes:
        raise ActionError("give content (replaces the text) or add_content (adds to it), not both")
    if "content" in changes:
        changes["content"] = blocks(changes["content"])
    if "add_content" in changes:
        changes["content"] = _appended(
            rendered(post.get("content")) or "", changes.pop("add_content")
        )
    for terms, taxonomy in (("categories", "category"), ("tags", "tag")):
        if terms in changes:
            changes[terms] = await term_ids(client, taxonomy, changes[terms])
    return changes


def _appended(current: str, addition: str) -> str:
    """The current content with `addition` after it, as blocks. Content that already ends with
    it (an interrupted attempt that took effect, read back by reconcile) is left as it is, so
    the same update never adds the text twice."""
    added = blocks(addition)
    if current.rstrip().endswith(added.strip()):
        return current
    return f"{current.rstrip()}\n\n{added}" if current.strip() else added


def _fields(post: dict[str, Any], names: list[str]) -> dict[str, Any]:
    return {name: rendered(post.get(name)) for name in names}


async def update_snapshot(
    params: UpdatePostParams, context: ActionContext, services: ActionServices
) -> dict[str, Any]:
    _asked(params)
    client = site(services)
    post = await target(client, params)
    changes = await _changes(client, params, post)
    return {"type": post["type"], "id": post["id"], "fields": _fields(post, list(changes))}


async def update_preview(
    params: UpdatePostParams, context: ActionContext, services: ActionServices
) -> dict[str, Any]:
    _asked(params)
    client = site(services)
    post = await target(client, params)
    changes = await _changes(client, params, post)
    return {"post": label(post), "before": _fields(post, list(changes)), "after": changes}


async def update_post(
    params: UpdatePostParams, context: ActionContext, services: ActionServices
) -> ActionResult:
    _asked(params)
    client = site(services)
    current = await target(client, params)  # a clear error for a post that is not there
    changes = await _changes(client, params, current)
    kind, post_id = str(current["type"]), int(current["id"])
    post = await client.post(route(kind, post_id), json=changes, idempotent=True)
    return ActionResult(
        content={**brief(post), "changed": sorted(changes)},
        summary=f"updated {', '.join(sorted(changes))} of {label(post)}",
    )


async def update_applied(
    params: UpdatePostParams, context: ActionContext, services: ActionServices
) -> ActionResult | None:
    """Reconcile: did an interrupted attempt of this update take effect? The post already has
    every field asked for: the step is done. Otherwise it runs again (an update is idempotent);
    the snapshot for undo was taken before the first attempt, so undo still goes back to it.
    A post named by its title may have been renamed by that attempt: a post with the new title
    and every field asked for is the one; else the title names it as before."""
    client = site(services)
    if params.pinned("post") is None and params.title is not None and as_id(params.post) is None:
        try:
            renamed = await find_post(
                client, params.title, params.type, either="type" not in params.model_fields_set
            )
        except ActionError:
            renamed = None
        if renamed is not None and (done := await _applied(client, params, renamed)):
            return done
    return await _applied(client, params, await target(client, params))


async def _applied(
    client: WordPressClient, params: UpdatePostParams, post: dict[str, Any]
) -> ActionResult | None:
    def same(value: Any) -> Any:  # term ids come back in WordPress's order
        return sorted(value) if isinstance(value, list) else value

    changes = await _changes(client, params, post)
    now = _fields(post, list(changes))
    if any(same(now[name]) != same(wanted) for name, wanted in changes.items()):
        return None
    return ActionResult(
        content={**brief(post), "changed": sorted(changes)},
        summary=f"updated {', '.join(sorted(changes))} of {label(post)} (found applied)",
    )


async def restore_fields(snapshot: Any, result: Any, services: ActionServices) -> ActionResult:
    """Undo for update, publish and trash: write back the fields read before."""
    if not isinstance(snapshot, dict) or not snapshot.get("fields"):
        raise ActionError("cannot undo: no snapshot of the fields before the change")
    kind, post_id = snapshot["type"], int(snapshot["id"])
    fields = dict(snapshot["fields"])
    post = await site(services).post(route(kind, post_id), json=fields, idempotent=True)
    return ActionResult(
        content={**brief(post), "restored": sorted(fields)},
        summary=f"undone: restored {', '.join(sorted(fields))} of {label(post)}",
    )


def _status_fields(post: dict[str, Any], *names: str) -> dict[str, Any]:
    return {"type": post.get("type"), "id": post.get("id"), "title": rendered(post.get("title")),
            "fields": {name: post.get(name) for name in names}}  # fmt: skip


async def status_snapshot(
    params: PostRefParams, context: ActionContext, services: ActionServices
) -> dict[str, Any]:
    return _status_fields(await target(site(services), params), "status")


async def trash_snapshot(
    params: PostRefParams, context: ActionContext, services: ActionServices
) -> dict[str, Any]:
    # Trashing appends "__trashed" to the slug. WordPress 6.1 puts the old slug back when the
    # status leaves the trash; undo also writes it back explicitly, so the link survives anyway.
    post = await target(site(services), params)
    return _status_fields(post, "status", "slug")


def status_preview(status: str) -> Any:
    """The approval preview of a change of status: the post before, and the status after."""

    async def preview(
        params: PostRefParams, context: ActionContext, services: ActionServices
    ) -> dict[str, Any]:
        before = await status_snapshot(params, context, services)
        shown = {"id": before["id"], "title": before["title"]}
        return {
            "before": {**shown, "status": before["fields"]["status"]},
            "after": {**shown, "status": status},
        }

    return preview


async def _set_status(params: PostRefParams, services: ActionServices, status: str) -> Any:
    client = site(services)
    current = await target(client, params)
    if current.get("status") == "trash":
        raise ActionError(f"{label(current)} is in the trash: restore it first")
    return await client.post(
        route(current["type"], current["id"]), json={"status": status}, idempotent=True
    )


async def publish_post(
    params: PostRefParams, context: ActionContext, services: ActionServices
) -> ActionResult:
    post = await _set_status(params, services, "publish")
    return ActionResult(content=brief(post), summary=f"published {label(post)}")


async def unpublish_post(
    params: PostRefParams, context: ActionContext, services: ActionServices
) -> ActionResult:
    post = await _set_status(params, services, "draft")
    return ActionResult(content=brief(post), summary=f"took {label(post)} offline: it is a draft")


# -- trash and delete -----------------------------------------------------------------------------


async def trash_preview(
    params: PostRefParams, context: ActionContext, services: ActionServices
) -> dict[str, Any]:
    before = await status_snapshot(params, context, services)
    return {
        "before": {
            "id": before["id"],
            "title": before["title"],
            "status": before["fields"]["status"],
        },
        "after": {"id": before["id"], "title": before["title"], "status": "trash"},
    }


async def trash_post(
    params: PostRefParams, context: ActionContext, services: ActionServices
) -> ActionResult:
    client = site(services)
    current = await target(client, params)
    if current.get("status") == "trash":
        raise ActionError(f"{label(current)} is already in the trash")
    post = await client.delete(route(current["type"], current["id"]))
    return ActionResult(content=brief(post), summary=f"moved {label(post)} to the trash")


async def delete_preview(
    params: PostRefParams, context: ActionContext, services: ActionServices
) -> dict[str, Any]:
    post = await target(site(services), params, trash=True)
    return {"before": brief(post), "after": None}


async def delete_post(
    params: PostRefParams, context: ActionContext, services: ActionServices
) -> ActionResult:
    client = site(services)
    current = await target(client, params, trash=True)
    kind, post_id = str(current["type"]), int(current["id"])
    answer = await client.delete(route(kind, post_id), {"force": True})
    previous = answer.get("previous", {}) if isinstance(answer, dict) else {}
    return ActionResult(
        content={
            "deleted": True,
            "id": post_id,
            "type": kind,
            "title": rendered(previous.get("title")),
        },  # fmt: skip
        summary=f"deleted {kind} #{post_id} permanently",
    )


_TYPE_NOTE = ' Set type "page" for pages.'
# Every action on one post names it by `post`: its id or its title (drafts included).

POST_ACTIONS: tuple[ActionSpec, ...] = (
    ActionSpec(
        name="list_posts",
        description="List or search posts (or pages): id, title, status, link. Drafts, pending, "
        "scheduled and private ones included; the trash only with status trash." + _TYPE_NOTE,
        params=ListPostsParams,
        risk=Risk.READ,
        untrusted_output=True,  # titles: authors and contributors write them
        handler=list_posts,
    ),
    ActionSpec(
        name="get_post",
        description="Read one post (or page), by id or title, with its block content and excerpt."
        + _TYPE_NOTE,
        params=GetPostParams,
        risk=Risk.READ,
        untrusted_output=True,
        handler=get_post,
    ),
    ActionSpec(
        name="update_post",
        description="Change a post's (or page's) title, content, excerpt, status, categories or "
        "tags; only the fields given change. Status draft unpublishes; categories and tags by "
        "name." + _TYPE_NOTE,
        params=UpdatePostParams,
        risk=Risk.WRITE,
        handler=update_post,
        reconcile=update_applied,
        snapshot=update_snapshot,
        preview=update_preview,
        undo=restore_fields,
    ),
    ActionSpec(
        name="publish_post",
        description="Publish a draft or pending post (or page) now." + _TYPE_NOTE,
        params=PostRefParams,
        risk=Risk.WRITE,
        handler=publish_post,
        snapshot=status_snapshot,
        preview=status_preview("publish"),
        undo=restore_fields,
    ),
    ActionSpec(
        name="unpublish_post",
        description="Take a published post (or page) offline: it becomes a draft, kept as it "
        "is." + _TYPE_NOTE,
        params=PostRefParams,
        risk=Risk.WRITE,
        handler=unpublish_post,
        snapshot=status_snapshot,
        preview=status_preview("draft"),
        undo=restore_fields,
    ),
    ActionSpec(
        name="trash_post",
        description="Move a post (or page) to the trash; it can be restored. Not for "
        "taking a post offline (unpublish_post does that)." + _TYPE_NOTE,
        params=PostRefParams,
        risk=Risk.DESTRUCTIVE,
        handler=trash_post,
        snapshot=trash_snapshot,
        preview=trash_preview,
        undo=restore_fields,
    ),
    ActionSpec(
        name="delete_post",
        description="Delete a post (or page) permanently, skipping the trash. Cannot be undone; "
        "prefer trash_post." + _TYPE_NOTE,
        params=PostRefParams,
        risk=Risk.DESTRUCTIVE,
        handler=delete_post,
        preview=delete_preview,
    ),
)

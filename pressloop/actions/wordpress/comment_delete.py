"""`delete_comment`: trash a comment, or with `force` delete it permanently; both can be undone.

Trashed: undo puts the status back. Deleted for good: the snapshot keeps the whole comment
(post, parent, author, email, URL, IP, user agent, date, text, status) and its direct replies,
which WordPress moves up a level when it deletes their parent. Undo recreates the comment over
REST and moves those replies back under it. WordPress gives the recreated comment a new id; the
undo result says so. Pingbacks and trackbacks cannot return (the REST API creates only
comments): the preview says so before a person approves the delete. A comment on a post that
has since been closed to comments, unpublished or trashed cannot return either: the undo fails
with WordPress's reason (403 rest_comment_closed, ...), and can be tried again once it is open.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from pressloop.actions.registry import ActionResult, ActionServices, ActionSpec
from pressloop.actions.wordpress.client import WordPressClient
from pressloop.actions.wordpress.comments import (
    VERB,
    brief,
    comment_field,
    restore_status,
    the_comment,
)
from pressloop.actions.wordpress.common import rendered, site
from pressloop.actions.wordpress.refs import Pinned, Ref
from pressloop.contracts import ActionContext, Risk
from pressloop.errors import ActionError, SiteError

# What a recreated comment gets back, as the REST API names it.
_KEPT = ("post", "parent", "author", "author_name", "author_email", "author_url", "author_ip",
         "author_user_agent", "date_gmt")  # fmt: skip


class DeleteCommentParams(Pinned):
    comment: Ref = comment_field("id")
    force: bool = Field(
        default=False,
        description="Delete permanently instead of trashing (undo recreates it under a new id).",
    )


async def _the(wp: WordPressClient, params: DeleteCommentParams) -> dict[str, Any]:
    """The comment named; a trashed one only for a permanent delete."""
    return await the_comment(wp, params, params.comment, trash=params.force)


async def _replies(wp: WordPressClient, comment_id: int) -> list[int]:
    query: dict[str, Any] = {"parent": comment_id, "status": "any", "per_page": 100}
    return [int(c["id"]) for c in await wp.get("/wp/v2/comments", query)]


async def delete_snapshot(
    params: DeleteCommentParams, _c: ActionContext, services: ActionServices
) -> dict[str, Any]:
    wp = site(services)
    found = await _the(wp, params)
    snapshot: dict[str, Any] = {"id": found["id"], "status": found["status"]}
    if not params.force:
        return snapshot
    kept = {k: found.get(k) for k in _KEPT}
    # Empty values are left out: WordPress would reject "" as an email or URL.
    snapshot["comment"] = {k: v for k, v in kept.items() if v not in (None, "", 0)} | {
        "content": rendered(found.get("content")) or ""
    }
    snapshot["replies"] = await _replies(wp, int(found["id"]))
    if found.get("type", "comment") != "comment":
        snapshot["not_recreatable"] = (
            f"it is a {found.get('type')}, and WordPress's REST API recreates only comments"
        )
    return snapshot


async def delete_comment_preview(
    params: DeleteCommentParams, context: ActionContext, services: ActionServices
) -> dict[str, Any]:
    snapshot = await delete_snapshot(params, context, services)
    found = await _the(site(services), params)
    if not params.force:
        return {"before": brief(found), "after": {"status": "trash"}}
    why = snapshot.get("not_recreatable")
    undo = f"not possible: {why}" if why else "recreates it under a new id"
    return {"before": brief(found), "after": None, "undo": undo}


async def delete_comment(
    params: DeleteCommentParams, _c: ActionContext, services: ActionServices
) -> ActionResult:
    wp = site(services)
    found = await _the(wp, params)
    cid = int(found["id"])
    if not params.force and found["status"] == "trash":
        raise ActionError(f"comment #{cid} is already in the trash; force deletes it")
    await wp.delete(f"/wp/v2/comments/{cid}", {"force": params.force})
    how = "deleted permanently" if params.force else "trashed"
    return ActionResult(
        content={"id": cid, "deleted": params.force, "trashed": not params.force},
        summary=f"comment #{cid} {how}",
    )


async def undo_delete_comment(
    snapshot: dict[str, Any], data: dict[str, Any], services: ActionServices
) -> ActionResult:
    if not data.get("deleted"):
        return await restore_status(snapshot, data, services)
    old = snapshot["id"]
    if "comment" not in snapshot or snapshot.get("not_recreatable"):
        why = snapshot.get("not_recreatable", "no copy of it was kept")
        raise ActionError(f"comment #{old} was deleted permanently and cannot return: {why}")
    wp = site(services)
    body = dict(snapshot["comment"]) | {"status": VERB.get(snapshot["status"], "hold")}
    try:
        made = await wp.post("/wp/v2/comments", body)
    except SiteError as error:
        raise ActionError(
            f"comment #{old} could not be recreated: {error.message}", retryable=error.retryable
        ) from error
    new = int(made["id"])
    moved = []
    for reply in snapshot.get("replies", []):
        try:
            await wp.post(f"/wp/v2/comments/{reply}", {"parent": new}, idempotent=True)
        except SiteError as error:
            if error.status != 404:  # a reply deleted since then stays deleted
                raise
            continue
        moved.append(reply)
    changed = f"as #{new} (WordPress gave it a new id)" if new != old else f"as #{new}"
    replies = f"; {len(moved)} replies moved back under it" if moved else ""
    return ActionResult(
        content=brief(made, text=False)
        | {"previous_id": old, "id_changed": new != old, "replies_moved_back": moved},
        summary=f"recreated deleted comment #{old} {changed}{replies}",
    )


DELETE_COMMENT = ActionSpec(
    name="delete_comment",
    description="Trash a comment (by id, author or words), or with force delete it "
    "permanently (undo then recreates it under a new id).",
    params=DeleteCommentParams,
    risk=Risk.DESTRUCTIVE,
    handler=delete_comment,
    preview=delete_comment_preview,
    snapshot=delete_snapshot,
    undo=undo_delete_comment,
)

"""Comment actions: list, moderate, reply, delete.

Comments are written by the public: any result carrying their text or author is `untrusted`,
so the runtime keeps it away from instructions (DESIGN.md section 5 and issue 4, point 9).
WordPress reports a comment's status as approved | hold | spam | trash and takes the verbs
approve | hold | spam | trash to change it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from pressloop.actions.registry import ActionResult, ActionServices, ActionSpec
from pressloop.actions.wordpress.client import WordPressClient
from pressloop.actions.wordpress.common import rendered, site
from pressloop.contracts import ActionContext, Risk
from pressloop.errors import ActionError

Verb = Literal["approve", "hold", "spam", "trash"]
_VERB = {"approved": "approve", "hold": "hold", "spam": "spam", "trash": "trash"}


class ListCommentsParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    status: Literal["approve", "hold", "spam", "trash", "all"] = Field(
        default="all", description="approve, hold (pending), spam, trash, or all (approve+hold)."
    )
    post: int | None = Field(default=None, ge=1, description="Only comments on this post id.")
    search: str | None = Field(default=None, description="Words in the comment.")
    per_page: int = Field(default=20, ge=1, le=100, description="How many per page.")
    page: int = Field(default=1, ge=1, description="Which page of results.")


class ModerateCommentParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: int = Field(ge=1, description="The comment id.")
    action: Verb = Field(description="approve, hold (back to pending), spam or trash.")


class ReplyParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    comment_id: int = Field(ge=1, description="The comment to reply to.")
    content: str = Field(min_length=1, max_length=5000, description="The reply's text.")


class DeleteCommentParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: int = Field(ge=1, description="The comment id.")
    force: bool = Field(
        default=False, description="Delete permanently (cannot be undone) instead of trashing."
    )


def _comment(item: dict[str, Any], *, text: bool = True) -> dict[str, Any]:
    found = {
        "id": item["id"],
        "post": item.get("post"),
        "parent": item.get("parent"),
        "date": item.get("date"),
        "status": item.get("status"),
    }
    if text:  # what the public wrote: only in results marked untrusted
        found["author_name"] = item.get("author_name")
        found["content"] = (rendered(item.get("content")) or "")[:1000]
    return found


async def _get(wp: WordPressClient, comment_id: int) -> dict[str, Any]:
    found: dict[str, Any] = await wp.get(f"/wp/v2/comments/{comment_id}")
    return found


async def list_comments(
    params: ListCommentsParams, _c: ActionContext, services: ActionServices
) -> ActionResult:
    query = params.model_dump(exclude_none=True) | {"context": "edit"}
    response = await site(services).request("GET", "/wp/v2/comments", params=query)
    comments = [_comment(c) for c in response.data]
    total = response.total if response.total is not None else len(comments)
    return ActionResult(
        content={"comments": comments, "total": total},
        summary=f"{len(comments)} of {total} comments ({params.status})",
        untrusted=True,
    )


async def _set_status(wp: WordPressClient, comment_id: int, verb: str) -> dict[str, Any]:
    changed = await wp.post(f"/wp/v2/comments/{comment_id}", {"status": verb}, idempotent=True)
    return _comment(changed, text=False)


async def status_before(
    params: ModerateCommentParams | DeleteCommentParams,
    _c: ActionContext,
    services: ActionServices,
) -> dict[str, Any]:
    found = await _get(site(services), params.id)
    return {"id": found["id"], "status": found["status"]}


async def moderate_preview(
    params: ModerateCommentParams, context: ActionContext, services: ActionServices
) -> dict[str, Any]:
    found = await _get(site(services), params.id)
    after = next(k for k, v in _VERB.items() if v == params.action)
    return {"before": _comment(found), "after": {"id": params.id, "status": after}}


async def moderate_comment(
    params: ModerateCommentParams, _c: ActionContext, services: ActionServices
) -> ActionResult:
    wp = site(services)
    before = await _get(wp, params.id)
    if _VERB.get(before["status"]) == params.action:
        return ActionResult(
            content=_comment(before, text=False) | {"changed": False},
            summary=f"comment #{params.id} was already {before['status']}",
        )
    after = await _set_status(wp, params.id, params.action)
    return ActionResult(
        content=after | {"changed": True, "status_before": before["status"]},
        summary=f"comment #{params.id}: {before['status']} -> {after['status']}",
    )


async def restore_status(
    snapshot: dict[str, Any], _data: Any, services: ActionServices
) -> ActionResult:
    verb = _VERB.get(snapshot["status"])
    if verb is None:
        raise ActionError(f"cannot restore comment status {snapshot['status']!r}")
    after = await _set_status(site(services), snapshot["id"], verb)
    return ActionResult(
        content=after, summary=f"comment #{snapshot['id']} is {after['status']} again"
    )


async def reply_to_comment(
    params: ReplyParams, _c: ActionContext, services: ActionServices
) -> ActionResult:
    wp = site(services)
    parent = await _get(wp, params.comment_id)
    body = {"post": parent["post"], "parent": parent["id"], "content": params.content}
    reply = _comment(await wp.post("/wp/v2/comments", body), text=False)
    return ActionResult(
        content=reply, summary=f"replied to comment #{parent['id']} with #{reply['id']}"
    )


async def reply_posted(
    params: ReplyParams, _c: ActionContext, services: ActionServices
) -> ActionResult | None:
    wp = site(services)
    query: dict[str, Any] = {"parent": params.comment_id, "status": "all", "per_page": 100}
    for item in await wp.get("/wp/v2/comments", query):
        if (rendered(item.get("content")) or "").strip() == params.content.strip():
            reply = _comment(item, text=False)
            return ActionResult(
                content=reply,
                summary=f"replied to comment #{params.comment_id} with #{reply['id']}",
            )
    return None


async def undo_reply(
    _snapshot: Any, data: dict[str, Any], services: ActionServices
) -> ActionResult:
    await site(services).delete(f"/wp/v2/comments/{data['id']}", {"force": True})
    return ActionResult(content={"deleted": data["id"]}, summary=f"deleted reply #{data['id']}")


async def delete_comment_preview(
    params: DeleteCommentParams, _c: ActionContext, services: ActionServices
) -> dict[str, Any]:
    found = await _get(site(services), params.id)
    return {"before": _comment(found), "after": None if params.force else {"status": "trash"}}


async def delete_comment(
    params: DeleteCommentParams, _c: ActionContext, services: ActionServices
) -> ActionResult:
    wp = site(services)
    if not params.force and (await _get(wp, params.id))["status"] == "trash":
        raise ActionError(f"comment #{params.id} is already in the trash; force deletes it")
    await wp.delete(f"/wp/v2/comments/{params.id}", {"force": params.force})
    how = "deleted permanently" if params.force else "trashed"
    return ActionResult(
        content={"id": params.id, "deleted": params.force, "trashed": not params.force},
        summary=f"comment #{params.id} {how}",
    )


async def undo_delete_comment(
    snapshot: dict[str, Any], data: dict[str, Any], services: ActionServices
) -> ActionResult:
    if data.get("deleted"):
        raise ActionError(f"comment #{snapshot['id']} was deleted permanently: it cannot return")
    return await restore_status(snapshot, data, services)


COMMENT_ACTIONS = (
    ActionSpec(
        name="list_comments",
        description="List comments (text, author, status) by status and post. Text is public.",
        params=ListCommentsParams,
        risk=Risk.READ,
        handler=list_comments,
    ),
    ActionSpec(
        name="moderate_comment",
        description="Approve, hold, mark as spam or trash a comment.",
        params=ModerateCommentParams,
        risk=Risk.WRITE,
        handler=moderate_comment,
        preview=moderate_preview,
        snapshot=status_before,
        undo=restore_status,
    ),
    ActionSpec(
        name="reply_to_comment",
        description="Reply to a comment as the site's user (published under the same post).",
        params=ReplyParams,
        risk=Risk.WRITE,
        handler=reply_to_comment,
        reconcile=reply_posted,
        undo=undo_reply,
    ),
    ActionSpec(
        name="delete_comment",
        description="Trash a comment, or with force delete it permanently (no undo then).",
        params=DeleteCommentParams,
        risk=Risk.DESTRUCTIVE,
        handler=delete_comment,
        preview=delete_comment_preview,
        snapshot=status_before,
        undo=undo_delete_comment,
    ),
)

"""Comment actions: list, moderate, reply (deleting is in `comment_delete`).

Comments are written by the public: any result carrying their text or author is `untrusted`,
so the runtime keeps it away from instructions (DESIGN.md section 5 and issue 4, point 9).
WordPress reports a comment's status as approved | hold | spam | trash and takes the verbs
approve | hold | spam | trash to change it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from pressloop.actions.registry import ActionResult, ActionServices, ActionSpec
from pressloop.actions.wordpress.client import WordPressClient
from pressloop.actions.wordpress.common import rendered, site
from pressloop.actions.wordpress.lookup import comment_by_id, find_comment, find_post
from pressloop.actions.wordpress.markers import marked, marker_headers
from pressloop.actions.wordpress.refs import Pinned, Ref
from pressloop.contracts import ActionContext, Risk
from pressloop.errors import ActionError

Verb = Literal["approve", "hold", "spam", "trash"]
VERB = {"approved": "approve", "hold": "hold", "spam": "spam", "trash": "trash"}


class ListCommentsParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    status: Literal["approve", "hold", "spam", "trash", "all"] = Field(
        default="all", description="approve, hold (pending), spam, trash, or all (approve+hold)."
    )
    post: Ref | None = Field(default=None, description="Only comments on this post (id or title).")
    search: str | None = Field(default=None, description="Words in the comment.")
    per_page: int = Field(default=20, ge=1, le=100, description="How many per page.")
    page: int = Field(default=1, ge=1, description="Which page of results.")


def comment_field(*legacy: str) -> Any:
    return Field(
        validation_alias=AliasChoices("comment", *legacy),
        description="The comment: its id, its author's name or words of its text.",
    )


class ModerateCommentParams(Pinned):
    comment: Ref = comment_field("id")
    action: Verb = Field(description="approve, hold (back to pending), spam or trash.")


class ReplyParams(Pinned):
    comment: Ref = comment_field("comment_id")
    content: str = Field(min_length=1, max_length=5000, description="The reply's text.")


def brief(item: dict[str, Any], *, text: bool = True) -> dict[str, Any]:
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


async def get_comment(wp: WordPressClient, comment_id: int) -> dict[str, Any]:
    return await comment_by_id(wp, comment_id)


async def the_comment(
    wp: WordPressClient, params: Pinned, ref: int | str, **options: Any
) -> dict[str, Any]:
    """The comment `ref` names, read now; resolved once per call (`refs.Pinned`)."""
    pinned = params.pinned("comment")
    found = await (
        comment_by_id(wp, pinned) if pinned is not None else find_comment(wp, ref, **options)
    )
    params.pin("comment", int(found["id"]))
    return found


async def list_comments(
    params: ListCommentsParams, _c: ActionContext, services: ActionServices
) -> ActionResult:
    wp = site(services)
    query = params.model_dump(exclude_none=True) | {"context": "edit"}
    if params.post is not None:
        query["post"] = (await find_post(wp, params.post, "post", either=True))["id"]
    response = await wp.request("GET", "/wp/v2/comments", params=query)
    comments = [brief(c) for c in response.data]
    total = response.total if response.total is not None else len(comments)
    return ActionResult(
        content={"comments": comments, "total": total},
        summary=f"{len(comments)} of {total} comments ({params.status})",
        untrusted=True,
    )


async def _set_status(wp: WordPressClient, comment_id: int, verb: str) -> dict[str, Any]:
    changed = await wp.post(f"/wp/v2/comments/{comment_id}", {"status": verb}, idempotent=True)
    return brief(changed, text=False)


async def status_before(
    params: ModerateCommentParams,
    _c: ActionContext,
    services: ActionServices,
) -> dict[str, Any]:
    found = await the_comment(
        site(services), params, params.comment, trash=params.action != "trash"
    )
    return {"id": found["id"], "status": found["status"]}


async def moderate_preview(
    params: ModerateCommentParams, context: ActionContext, services: ActionServices
) -> dict[str, Any]:
    found = await the_comment(
        site(services), params, params.comment, trash=params.action != "trash"
    )
    after = next(k for k, v in VERB.items() if v == params.action)
    return {"before": brief(found), "after": {"id": found["id"], "status": after}}


async def moderate_comment(
    params: ModerateCommentParams, _c: ActionContext, services: ActionServices
) -> ActionResult:
    wp = site(services)
    before = await the_comment(wp, params, params.comment, trash=params.action != "trash")
    cid = int(before["id"])
    if VERB.get(before["status"]) == params.action:
        return ActionResult(
            content=brief(before, text=False) | {"changed": False},
            summary=f"comment #{cid} was already {before['status']}",
        )
    after = await _set_status(wp, cid, params.action)
    return ActionResult(
        content=after | {"changed": True, "status_before": before["status"]},
        summary=f"comment #{cid}: {before['status']} -> {after['status']}",
    )


async def restore_status(
    snapshot: dict[str, Any], _data: Any, services: ActionServices
) -> ActionResult:
    verb = VERB.get(snapshot["status"])
    if verb is None:
        raise ActionError(f"cannot restore comment status {snapshot['status']!r}")
    after = await _set_status(site(services), snapshot["id"], verb)
    return ActionResult(
        content=after, summary=f"comment #{snapshot['id']} is {after['status']} again"
    )


async def reply_to_comment(
    params: ReplyParams, context: ActionContext, services: ActionServices
) -> ActionResult:
    wp = site(services)
    parent = await the_comment(wp, params, params.comment, not_text=params.content)
    body = {"post": parent["post"], "parent": parent["id"], "content": params.content}
    made = await wp.post("/wp/v2/comments", body, headers=marker_headers(context))
    reply = brief(made, text=False)
    return ActionResult(
        content=reply, summary=f"replied to comment #{parent['id']} with #{reply['id']}"
    )


async def reply_posted(
    params: ReplyParams, context: ActionContext, services: ActionServices
) -> ActionResult | None:
    """The reply an interrupted attempt of this step posted: by the step's marker where the
    site tags creates (`markers`), else a reply to that comment with exactly this text."""
    wp = site(services)
    made = await marked(wp, context, "comment")
    if made is not None:
        replies = [await get_comment(wp, made[0].id)] if made else []
    else:
        parent = await the_comment(wp, params, params.comment, not_text=params.content)
        query: dict[str, Any] = {"parent": parent["id"], "status": "all", "per_page": 100}
        replies = [
            item
            for item in await wp.get("/wp/v2/comments", query)
            if (rendered(item.get("content")) or "").strip() == params.content.strip()
        ]
    if not replies:
        return None
    reply = brief(replies[0], text=False)
    return ActionResult(
        content=reply, summary=f"replied to comment #{reply['parent']} with #{reply['id']}"
    )


async def undo_reply(
    _snapshot: Any, data: dict[str, Any], services: ActionServices
) -> ActionResult:
    await site(services).delete(f"/wp/v2/comments/{data['id']}", {"force": True})
    return ActionResult(content={"deleted": data["id"]}, summary=f"deleted reply #{data['id']}")


COMMENT_ACTIONS = (
    ActionSpec(
        name="list_comments",
        description="List comments (text, author, status) by status and post. Text is public.",
        params=ListCommentsParams,
        risk=Risk.READ,
        untrusted_output=True,  # the public writes comments
        handler=list_comments,
    ),
    ActionSpec(
        name="moderate_comment",
        description="Approve, hold, mark as spam or trash a comment (by id, author or words).",
        params=ModerateCommentParams,
        risk=Risk.WRITE,
        handler=moderate_comment,
        preview=moderate_preview,
        snapshot=status_before,
        undo=restore_status,
    ),
    ActionSpec(
        name="reply_to_comment",
        description="Reply to a comment (by id, author or words) as the site's user.",
        params=ReplyParams,
        risk=Risk.WRITE,
        handler=reply_to_comment,
        reconcile=reply_posted,
        undo=undo_reply,
    ),
)

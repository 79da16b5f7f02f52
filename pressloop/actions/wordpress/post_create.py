"""`create_post`: a post or page from Gutenberg block markup (or plain text made into blocks).

Undo deletes what the create made (skipping the trash).

Reconcile (a create interrupted after WordPress acted, before the ledger stored the outcome):
exact on a site with the `pressloop-calls.php` mu-plugin, which tags the post with the step's
marker (`markers`). Without it, the post is recognised by what it wrote: the newest post of that
type whose raw title, raw content and status are the ones asked for, modified within
`RECONCILE_WINDOW`; two identical posts made by different steps within the window are then
indistinguishable, which only matters if the agent deliberately creates duplicates.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pressloop.actions.registry import ActionResult, ActionServices, ActionSpec
from pressloop.actions.wordpress.blocks import blocks
from pressloop.actions.wordpress.client import WordPressClient
from pressloop.actions.wordpress.common import rendered, site
from pressloop.actions.wordpress.lookup import term_ids
from pressloop.actions.wordpress.markers import marked, marker_headers
from pressloop.actions.wordpress.post_params import (
    LIVE_STATUSES,
    RECONCILE_WINDOW,
    CreatePostParams,
)
from pressloop.actions.wordpress.posts import brief, label, no_terms_on_pages, route
from pressloop.clock import Now
from pressloop.contracts import ActionContext, Risk
from pressloop.errors import ActionError


def _create_body(params: CreatePostParams) -> dict[str, Any]:
    body: dict[str, Any] = {
        "title": params.title,
        "content": blocks(params.content),
        "status": params.status,
    }
    if params.excerpt is not None:
        body["excerpt"] = params.excerpt
    for terms in ("categories", "tags"):
        if (value := getattr(params, terms)) is not None:
            body[terms] = value
    return body


async def create_post(
    params: CreatePostParams, context: ActionContext, services: ActionServices
) -> ActionResult:
    no_terms_on_pages(params.type, params.categories, params.tags)
    client = site(services)
    body = _create_body(params)
    for terms, taxonomy in (("categories", "category"), ("tags", "tag")):
        if terms in body:  # names become ids; a name no term has is a clear error
            body[terms] = await term_ids(client, taxonomy, body[terms])
    post = await client.post(route(params.type), json=body, headers=marker_headers(context))
    return ActionResult(content=brief(post), summary=f"created {label(post)} ({post['status']})")


def _found(post: dict[str, Any]) -> ActionResult:
    return ActionResult(content=brief(post), summary=f"created {label(post)} (found again)")


async def find_created_post(
    params: CreatePostParams, context: ActionContext, services: ActionServices
) -> ActionResult | None:
    """The post an interrupted attempt of this step made, if any (see the module's notes)."""
    client = site(services)
    made = await marked(client, context, "post", (params.type,))
    if made is not None:
        return _found(await client.get(route(params.type, made[0].id))) if made else None
    return await _look_alike(client, params, now=services.now)


async def _look_alike(
    client: WordPressClient, params: CreatePostParams, *, now: Now
) -> ActionResult | None:
    body = _create_body(params)
    # WordPress's search reads "-word" as "without word", so the newest posts are looked at too.
    query: dict[str, Any] = {"status": LIVE_STATUSES, "order": "desc", "per_page": 20}
    candidates = [
        *(await client.get(route(params.type), {**query, "search": params.title})),
        *(await client.get(route(params.type), {**query, "orderby": "modified"})),
    ]
    since = now() - RECONCILE_WINDOW
    for post in candidates:
        modified = datetime.fromisoformat(post.get("modified_gmt") or "1970-01-01T00:00:00")
        if (
            rendered(post.get("title")) == body["title"]
            and (rendered(post.get("content")) or "") == body["content"]
            and post.get("status") in (body["status"], "future")
            and modified.replace(tzinfo=UTC) >= since
        ):
            return _found(post)
    return None


async def delete_created_post(snapshot: Any, result: Any, services: ActionServices) -> ActionResult:
    if not isinstance(result, dict) or not result.get("id"):
        raise ActionError("cannot undo: the created post's id is not known")
    kind = result.get("type") or "post"
    await site(services).delete(route(kind, int(result["id"])), {"force": True})
    return ActionResult(
        content={"deleted": result["id"], "type": kind},
        summary=f"undone: deleted the created {kind} #{result['id']}",
    )


CREATE_POST = ActionSpec(
    name="create_post",
    description="Create a post (or page); a draft unless status says otherwise. Content is "
    'Gutenberg block markup or plain text. Set type "page" for pages.',
    params=CreatePostParams,
    risk=Risk.WRITE,
    handler=create_post,
    reconcile=find_created_post,
    undo=delete_created_post,
)

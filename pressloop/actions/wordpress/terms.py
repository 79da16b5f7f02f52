"""Category and tag actions: list, create (undo deletes it), delete (no undo).

Both taxonomies share one implementation. Terms cannot be trashed, so deleting one is final:
its id and its links to posts are gone, and recreating it would not bring them back; the delete
actions therefore have a preview but no undo.

Term names come back HTML-escaped ("Tea &amp; Cake"): results show them unescaped.

Reconcile for a create: by the step's marker on a site with the `pressloop-calls.php`
mu-plugin (`markers`). Without it: WordPress refuses a second term with the same name (and
parent), so a term of exactly that name found after an interrupted attempt is taken as the one
that attempt made (a person may have made it in between; the marker tells them apart).
"""

from __future__ import annotations

import html
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from pressloop.actions.registry import ActionResult, ActionServices, ActionSpec
from pressloop.actions.wordpress.client import WordPressClient
from pressloop.actions.wordpress.common import site
from pressloop.actions.wordpress.lookup import find_term, term_by_id
from pressloop.actions.wordpress.markers import marked, marker_headers
from pressloop.actions.wordpress.refs import Pinned, Ref
from pressloop.contracts import DICTATED, ActionContext, Risk
from pressloop.errors import ActionError

Taxonomy = Literal["category", "tag"]
_ROUTES = {"category": "/wp/v2/categories", "tag": "/wp/v2/tags"}
_TAXONOMIES = {"category": "category", "tag": "post_tag"}  # WordPress's own names


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ListTermsParams(_Params):
    search: str = Field(default="", max_length=200, description="Words in the name to look for.")
    per_page: int = Field(default=50, ge=1, le=100, description="How many per page (<= 100).")
    page: int = Field(default=1, ge=1, description="Which page of results, from 1.")


class CreateCategoryParams(_Params):
    name: str = Field(min_length=1, max_length=200, description="The category's name.")
    description: str = Field(
        default="", max_length=2000, description="Optional description.", json_schema_extra=DICTATED
    )
    parent: int | None = Field(default=None, ge=0, description="Parent category id, if any.")
    slug: str | None = Field(
        default=None, max_length=200, description="URL slug (optional).", json_schema_extra=DICTATED
    )


class CreateTagParams(_Params):
    name: str = Field(min_length=1, max_length=200, description="The tag's name.")
    description: str = Field(
        default="", max_length=2000, description="Optional description.", json_schema_extra=DICTATED
    )
    slug: str | None = Field(
        default=None, max_length=200, description="URL slug (optional).", json_schema_extra=DICTATED
    )


class DeleteCategoryParams(Pinned):
    category: Ref = Field(
        validation_alias=AliasChoices("category", "id"),
        description="The category: its id, name or slug.",
    )


class DeleteTagParams(Pinned):
    tag: Ref = Field(
        validation_alias=AliasChoices("tag", "id"), description="The tag: its id, name or slug."
    )


TermRefParams = DeleteCategoryParams | DeleteTagParams


async def _named(
    client: WordPressClient, taxonomy: Taxonomy, params: TermRefParams
) -> dict[str, Any]:
    """The term the params name, read now; resolved once per call (`refs.Pinned`)."""
    pinned = params.pinned("term")
    ref = params.category if isinstance(params, DeleteCategoryParams) else params.tag
    term = await find_term(client, taxonomy, pinned if pinned is not None else ref)
    params.pin("term", int(term["id"]))
    return term


def _brief(term: dict[str, Any]) -> dict[str, Any]:
    out = {
        "id": term.get("id"),
        "name": html.unescape(str(term.get("name", ""))),
        "slug": term.get("slug"),
        "count": term.get("count"),
    }
    if term.get("description"):
        out["description"] = term["description"]
    if "parent" in term:
        out["parent"] = term["parent"]
    return out


async def _fetch(client: WordPressClient, taxonomy: Taxonomy, term_id: int) -> dict[str, Any]:
    return await term_by_id(client, taxonomy, term_id)


def _plural(taxonomy: Taxonomy) -> str:
    return "categories" if taxonomy == "category" else "tags"


def _listing(taxonomy: Taxonomy) -> Any:
    async def handler(
        params: ListTermsParams, context: ActionContext, services: ActionServices
    ) -> ActionResult:
        query: dict[str, Any] = {"per_page": params.per_page, "page": params.page}
        if params.search:
            query["search"] = params.search
        response = await site(services).request("GET", _ROUTES[taxonomy], params=query)
        items = [_brief(t) for t in response.data or []]
        total = response.total if response.total is not None else len(items)
        plural = _plural(taxonomy)
        return ActionResult(
            content={"total": total, "page": params.page, plural: items},
            summary=f"listed {len(items)} of {total} {plural}",
            untrusted=True,
        )

    return handler


def _body(params: CreateCategoryParams | CreateTagParams) -> dict[str, Any]:
    return params.model_dump(exclude_none=True)


def _creating(taxonomy: Taxonomy) -> Any:
    async def handler(
        params: CreateCategoryParams | CreateTagParams,
        context: ActionContext,
        services: ActionServices,
    ) -> ActionResult:
        term = await site(services).post(
            _ROUTES[taxonomy], json=_body(params), headers=marker_headers(context)
        )
        found = _brief(term)
        return ActionResult(
            content={**found, "taxonomy": taxonomy},
            summary=f"created {taxonomy} #{found['id']} {found['name']!r}",
        )

    return handler


def _made(taxonomy: Taxonomy, term: dict[str, Any]) -> ActionResult:
    found = _brief(term)
    return ActionResult(
        content={**found, "taxonomy": taxonomy},
        summary=f"created {taxonomy} #{found['id']} {found['name']!r} (found again)",
    )


def _finding(taxonomy: Taxonomy) -> Any:
    async def reconcile(
        params: CreateCategoryParams | CreateTagParams,
        context: ActionContext,
        services: ActionServices,
    ) -> ActionResult | None:
        client = site(services)
        made = await marked(client, context, "term", (_TAXONOMIES[taxonomy],))
        if made is not None:  # the site tags creates: exact
            return _made(taxonomy, await _fetch(client, taxonomy, made[0].id)) if made else None
        # WordPress stores term names HTML-escaped ("A &amp; B") and searches them as stored.
        found_terms: list[dict[str, Any]] = []
        for words in dict.fromkeys([html.escape(params.name, quote=False), params.name]):
            found_terms += await client.get(
                _ROUTES[taxonomy], {"search": words, "per_page": 100, "hide_empty": False}
            )
        parent = getattr(params, "parent", None) or 0
        for term in found_terms:
            if html.unescape(str(term.get("name", ""))) == params.name and (
                taxonomy == "tag" or term.get("parent", 0) == parent
            ):
                return _made(taxonomy, term)
        return None

    return reconcile


async def delete_created_term(snapshot: Any, result: Any, services: ActionServices) -> ActionResult:
    if (
        not isinstance(result, dict)
        or not result.get("id")
        or result.get("taxonomy") not in _ROUTES
    ):
        raise ActionError("cannot undo: the created term's id is not known")
    taxonomy = result["taxonomy"]
    await site(services).delete(f"{_ROUTES[taxonomy]}/{int(result['id'])}", {"force": True})
    return ActionResult(
        content={"deleted": result["id"], "taxonomy": taxonomy},
        summary=f"undone: deleted the created {taxonomy} #{result['id']}",
    )


def _previewing(taxonomy: Taxonomy) -> Any:
    async def preview(
        params: TermRefParams, context: ActionContext, services: ActionServices
    ) -> dict[str, Any]:
        term = await _named(site(services), taxonomy, params)
        return {"before": {**_brief(term), "posts_using_it": term.get("count")}, "after": None}

    return preview


def _deleting(taxonomy: Taxonomy) -> Any:
    async def handler(
        params: TermRefParams, context: ActionContext, services: ActionServices
    ) -> ActionResult:
        client = site(services)
        term = await _named(client, taxonomy, params)
        term_id = int(term["id"])
        await client.delete(f"{_ROUTES[taxonomy]}/{term_id}", {"force": True})
        name = html.unescape(str(term.get("name", "")))
        return ActionResult(
            content={"deleted": True, "id": term_id, "taxonomy": taxonomy, "name": name},
            summary=f"deleted {taxonomy} #{term_id} {name!r} permanently",
        )

    return handler


TERM_ACTIONS: tuple[ActionSpec, ...] = (
    ActionSpec(
        name="list_categories",
        description="List or search the site's categories (id, name, slug, post count).",
        params=ListTermsParams,
        risk=Risk.READ,
        untrusted_output=True,
        handler=_listing("category"),
    ),
    ActionSpec(
        name="create_category",
        description="Create a category; use its id or name in create_post or update_post.",
        params=CreateCategoryParams,
        risk=Risk.WRITE,
        handler=_creating("category"),
        reconcile=_finding("category"),
        undo=delete_created_term,
    ),
    ActionSpec(
        name="delete_category",
        description="Delete a category (by id, name or slug); its posts stay. No undo.",
        params=DeleteCategoryParams,
        risk=Risk.DESTRUCTIVE,
        handler=_deleting("category"),
        preview=_previewing("category"),
    ),
    ActionSpec(
        name="list_tags",
        description="List or search the site's tags (id, name, slug, post count).",
        params=ListTermsParams,
        risk=Risk.READ,
        untrusted_output=True,
        handler=_listing("tag"),
    ),
    ActionSpec(
        name="create_tag",
        description="Create a tag; use its id or name in create_post or update_post.",
        params=CreateTagParams,
        risk=Risk.WRITE,
        handler=_creating("tag"),
        reconcile=_finding("tag"),
        undo=delete_created_term,
    ),
    ActionSpec(
        name="delete_tag",
        description="Delete a tag (by id, name or slug); its posts stay. No undo.",
        params=DeleteTagParams,
        risk=Risk.DESTRUCTIVE,
        handler=_deleting("tag"),
        preview=_previewing("tag"),
    ),
)

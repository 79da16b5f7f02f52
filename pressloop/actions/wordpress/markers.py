"""Step markers: exact reconcile of creates, with the site's `pressloop-calls.php` mu-plugin.

Every create the pack sends carries the header `X-Pressloop-Call: <run id>:<step index>` (the
ledger's key for the step). A site with the mu-plugin (pressloop/local_wordpress/php/; the local
site installs it) stores the marker on what the request created and answers
`GET /pressloop/v1/calls?marker=...` with the objects that carry it. After a crash between a
create and its ledger outcome, `marked()` says exactly whether that step's create happened and
what it made. Without the plugin the route does not exist (404 rest_no_route): `marked()`
returns None and each action falls back to recognising what it wrote.
"""

from __future__ import annotations

from dataclasses import dataclass

from pressloop.actions.wordpress.client import WordPressClient
from pressloop.contracts import ActionContext
from pressloop.errors import SiteError

HEADER = "X-Pressloop-Call"
ROUTE = "/pressloop/v1/calls"


@dataclass(kw_only=True, frozen=True)
class Marked:
    """One object a step created: kind post|term|user|comment, its post type or taxonomy."""

    kind: str
    type: str
    id: int


def marker(context: ActionContext) -> str:
    return f"{context.run_id}:{context.step_index}"


def marker_headers(context: ActionContext) -> dict[str, str]:
    """The headers a create sends so the site can tag what it makes."""
    return {HEADER: marker(context)}


async def marked(
    client: WordPressClient, context: ActionContext, kind: str, types: tuple[str, ...] = ()
) -> list[Marked] | None:
    """What this step created of `kind` (and of `types`, if given), oldest first; None when
    the site lacks the mu-plugin, so the caller must fall back to its own heuristic."""
    try:
        answer = await client.get(ROUTE, {"marker": marker(context)}, context="")
    except SiteError as error:
        if error.status == 404 and error.site_code == "rest_no_route":
            return None
        raise
    objects = answer.get("objects", []) if isinstance(answer, dict) else []
    found = [
        Marked(kind=str(o["kind"]), type=str(o["type"]), id=int(o["id"]))
        for o in objects
        if o.get("kind") == kind and (not types or o.get("type") in types)
    ]
    return sorted(found, key=lambda m: m.id)

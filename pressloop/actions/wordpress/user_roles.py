"""User actions that change who may do what: set a role, delete (with reassign).

WordPress quirks handled here:
- DELETE /wp/v2/users/{id} needs `force=true` (users have no trash) and `reassign`; a `reassign`
  of `false` or "" makes WordPress DELETE every post the user wrote, so it is always a user here.
- WordPress refuses to give the acting admin a role without `edit_users` (a clear 403), and
  Pressloop refuses to delete the user it signs in as.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from pressloop.actions.registry import ActionResult, ActionServices, ActionSpec
from pressloop.actions.wordpress.client import WordPressClient
from pressloop.actions.wordpress.common import site
from pressloop.actions.wordpress.lookup import find_user
from pressloop.actions.wordpress.refs import Ref
from pressloop.actions.wordpress.users import UserRef, compact, me, the_user
from pressloop.contracts import ActionContext, Risk
from pressloop.errors import ActionError


class SetUserRoleParams(UserRef):
    role: str = Field(
        pattern=r"^[a-z0-9_-]{1,60}$", description="A role slug, e.g. editor, author."
    )


class DeleteUserParams(UserRef):
    reassign: Ref = Field(
        description="Who gets their posts and pages: id, login, email or display name."
    )


async def _reassignee(wp: WordPressClient, params: DeleteUserParams) -> dict[str, Any]:
    pinned = params.pinned("reassign")
    try:
        found = await find_user(wp, pinned if pinned is not None else params.reassign)
    except ActionError as error:
        raise ActionError(f"reassign: {error.message}") from error
    params.pin("reassign", int(found["id"]))
    return found


async def roles_before(
    params: SetUserRoleParams, _c: ActionContext, services: ActionServices
) -> dict[str, Any]:
    user = await the_user(site(services), params)
    return {"id": user["id"], "roles": user.get("roles", [])}


async def set_role_preview(
    params: SetUserRoleParams, context: ActionContext, services: ActionServices
) -> dict[str, Any]:
    before = await roles_before(params, context, services)
    return {
        "user": before["id"],
        "before": {"roles": before["roles"]},
        "after": {"roles": [params.role]},
    }


async def set_user_role(
    params: SetUserRoleParams, _c: ActionContext, services: ActionServices
) -> ActionResult:
    wp = site(services)
    user = await the_user(wp, params)
    updated = compact(
        await wp.post(f"/wp/v2/users/{user['id']}", {"roles": [params.role]}, idempotent=True)
    )
    return ActionResult(
        content=updated | {"roles_before": user.get("roles", [])},
        summary=f"user #{updated['id']} is now {params.role}",
    )


async def restore_roles(
    snapshot: dict[str, Any], _data: Any, services: ActionServices
) -> ActionResult:
    if not snapshot["roles"]:
        raise ActionError("the user had no role before: WordPress cannot set an empty role list")
    restored = await site(services).post(
        f"/wp/v2/users/{snapshot['id']}", {"roles": snapshot["roles"]}, idempotent=True
    )
    return ActionResult(
        content=compact(restored),
        summary=f"restored the roles of user #{snapshot['id']}: {', '.join(snapshot['roles'])}",
    )


async def _authored(wp: WordPressClient, user_id: int) -> dict[str, int]:
    counts = {}
    for kind in ("posts", "pages"):
        query: dict[str, Any] = {
            "author": user_id,
            "status": "any",
            "per_page": 1,
            "context": "edit",
        }
        counts[kind] = (await wp.request("GET", f"/wp/v2/{kind}", params=query)).total or 0
    return counts


async def _deletion(
    params: DeleteUserParams, wp: WordPressClient
) -> tuple[dict[str, Any], dict[str, Any]]:
    user = await the_user(wp, params)
    heir = await _reassignee(wp, params)
    if heir["id"] == user["id"]:
        raise ActionError("reassign names the user being deleted: choose someone else")
    if user["id"] == (await me(wp))["id"]:
        raise ActionError("refusing to delete the user Pressloop itself signs in as")
    return user, heir


async def delete_user_preview(
    params: DeleteUserParams, _c: ActionContext, services: ActionServices
) -> dict[str, Any]:
    wp = site(services)
    user, heir = await _deletion(params, wp)
    return {
        "before": compact(user) | {"authored": await _authored(wp, user["id"])},
        "after": {"deleted": user["id"], "content_goes_to": compact(heir)},
    }


async def delete_user(
    params: DeleteUserParams, _c: ActionContext, services: ActionServices
) -> ActionResult:
    wp = site(services)
    user, heir = await _deletion(params, wp)
    await wp.delete(f"/wp/v2/users/{user['id']}", {"force": True, "reassign": heir["id"]})
    return ActionResult(
        content={"deleted": compact(user), "reassigned_to": compact(heir)},
        summary=f"deleted user #{user['id']} {user.get('username')}; content to #{heir['id']}",
    )


USER_ROLE_ACTIONS = (
    ActionSpec(
        name="set_user_role",
        description="Replace a user's role (e.g. subscriber -> editor).",
        params=SetUserRoleParams,
        risk=Risk.DESTRUCTIVE,
        sensitive=True,
        handler=set_user_role,
        preview=set_role_preview,
        snapshot=roles_before,
        undo=restore_roles,
    ),
    ActionSpec(
        name="delete_user",
        description=(
            "Delete a user (by id, login, email or display name); their posts and pages go to "
            "`reassign`. Cannot be undone."
        ),
        params=DeleteUserParams,
        risk=Risk.DESTRUCTIVE,
        sensitive=True,
        handler=delete_user,
        preview=delete_user_preview,
    ),
)

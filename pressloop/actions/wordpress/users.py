"""User actions: list, get, create, update (roles and deletion are in `user_roles`).

A user is named by `user`: an id, login, email or display name (`UserRef`, `lookup.find_user`;
the old `id`, `email` or `login` params still work). WordPress's `search` is a wildcard match
over several columns, so the answer is filtered exactly; two users matching is a "which one?".
"""

from __future__ import annotations

import secrets
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from pressloop.actions.registry import ActionResult, ActionServices, ActionSpec
from pressloop.actions.wordpress.client import WordPressClient
from pressloop.actions.wordpress.common import site
from pressloop.actions.wordpress.lookup import find_user
from pressloop.actions.wordpress.markers import marked, marker_headers
from pressloop.actions.wordpress.refs import Pinned, Ref
from pressloop.contracts import DICTATED, ActionContext, Risk
from pressloop.errors import ActionError
from pressloop.redaction import SECRET_FIELD

_LEGACY = ("id", "email", "login")  # what the actions took before `user`


class UserRef(Pinned):
    """The user, by id, login, email or display name (`lookup.find_user`)."""

    user: Ref = Field(description="The user: id, login, email or display name.")

    @model_validator(mode="before")
    @classmethod
    def _one_reference(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        named = [k for k in ("user", *_LEGACY) if data.get(k) is not None]
        if len(named) != 1:
            raise ValueError(
                "name the user by exactly one of user, id, email or login"
                + (f" (got {', '.join(named)})" if named else " (none given)")
            )
        data = {k: v for k, v in data.items() if k not in _LEGACY or v is not None}
        if named[0] != "user":
            data["user"] = data.pop(named[0])
        return data

    def label(self) -> str:
        return f"{self.user!r}"


class ListUsersParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: str | None = Field(default=None, description="Only users with this role slug.")
    search: str | None = Field(default=None, description="Words in login, email or name.")
    per_page: int = Field(default=20, ge=1, le=100, description="How many users per page.")
    page: int = Field(default=1, ge=1, description="Which page of results.")


class CreateUserParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    username: str = Field(min_length=1, max_length=60, description="The login name.")
    email: str = Field(min_length=3, description="The user's email address.")
    password: str | None = Field(
        default=None,
        min_length=8,
        description="Password; a strong random one if omitted. Never stored or shown.",
        json_schema_extra=SECRET_FIELD,
    )
    role: str = Field(
        default="subscriber",
        pattern=r"^[a-z0-9_-]{1,60}$",
        description="Role slug (not administrator: use set_user_role for that).",
    )
    name: str | None = Field(default=None, description="Display name.")
    first_name: str | None = None
    last_name: str | None = None
    url: str | None = Field(default=None, description="The user's website.")
    description: str | None = Field(default=None, description="Biographical info.")


class UpdateUserParams(UserRef):
    """The user, then the profile fields to change (roles are set with set_user_role)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=DICTATED)

    new_email: str | None = Field(default=None, min_length=3, description="A new email.")
    name: str | None = Field(default=None, description="New display name.")
    first_name: str | None = None
    last_name: str | None = None
    nickname: str | None = None
    url: str | None = Field(default=None, description="New website address.")
    description: str | None = Field(default=None, description="New biographical info.")

    def changes(self) -> dict[str, Any]:
        fields = self.model_dump(exclude_none=True, exclude={"user"})
        if "new_email" in fields:
            fields["email"] = fields.pop("new_email")
        return fields

    @model_validator(mode="after")
    def _something(self) -> Self:
        if not self.changes():
            raise ValueError("give at least one field to change")
        return self


def changes_email(params: UpdateUserParams, _services: ActionServices) -> bool:
    return params.new_email is not None


def compact(user: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": user["id"],
        "login": user.get("username"),
        "email": user.get("email"),
        "name": user.get("name"),
        "roles": user.get("roles", []),
        "registered": user.get("registered_date"),
    }


async def me(wp: WordPressClient) -> dict[str, Any]:
    """The user Pressloop acts as."""
    found: dict[str, Any] = await wp.get("/wp/v2/users/me")
    return found


async def search_user(wp: WordPressClient, term: str, key: str) -> dict[str, Any] | None:
    found = await wp.get("/wp/v2/users", {"search": term, "per_page": 100})
    for user in found:
        if str(user.get(key, "")).lower() == term.lower():
            return dict(user)
    return None


async def the_user(wp: WordPressClient, ref: UserRef) -> dict[str, Any]:
    """The user `ref` names, read now; resolved once per call (`refs.Pinned`)."""
    pinned = ref.pinned("user")
    found = await find_user(wp, pinned if pinned is not None else ref.user)
    ref.pin("user", int(found["id"]))
    return found


async def list_users(
    params: ListUsersParams, _context: ActionContext, services: ActionServices
) -> ActionResult:
    query: dict[str, Any] = {"per_page": params.per_page, "page": params.page}
    if params.role:
        query["roles"] = params.role
    if params.search:
        query["search"] = params.search
    response = await site(services).request(
        "GET", "/wp/v2/users", params=query | {"context": "edit"}
    )
    users = [compact(u) for u in response.data]
    total = response.total if response.total is not None else len(users)
    return ActionResult(
        content={"users": users, "total": total}, summary=f"{len(users)} of {total} users"
    )


async def get_user(params: UserRef, _c: ActionContext, services: ActionServices) -> ActionResult:
    user = compact(await the_user(site(services), params))
    return ActionResult(content=user, summary=f"user #{user['id']} {user['login']}")


async def create_user(
    params: CreateUserParams, context: ActionContext, services: ActionServices
) -> ActionResult:
    if params.role == "administrator":
        raise ActionError(
            "create_user does not make administrators: create the user, then set_user_role "
            "(which a person approves)"
        )
    body = params.model_dump(exclude_none=True, exclude={"role", "password"})
    body["roles"] = [params.role]
    body["password"] = params.password or secrets.token_urlsafe(24)
    user = compact(await site(services).post("/wp/v2/users", body, headers=marker_headers(context)))
    if params.password is None:
        user["password"] = "random, not shown: the user can reset it from the login page"
    return ActionResult(content=user, summary=f"created user #{user['id']} {user['login']}")


async def user_created(
    params: CreateUserParams, context: ActionContext, services: ActionServices
) -> ActionResult | None:
    """The user an interrupted attempt of this step made: by the step's marker where the site
    tags creates (`markers`), else by the login or email, which WordPress keeps unique."""
    wp = site(services)
    made = await marked(wp, context, "user")
    if made is not None:
        found = await wp.get(f"/wp/v2/users/{made[0].id}") if made else None
    else:
        found = await search_user(wp, params.username, "username") or await search_user(
            wp, params.email, "email"
        )
    if found is None:
        return None
    user = compact(found)
    return ActionResult(content=user, summary=f"created user #{user['id']} {user['login']}")


async def undo_create_user(
    _snapshot: Any, data: dict[str, Any], services: ActionServices
) -> ActionResult:
    wp = site(services)
    admin = await me(wp)
    await wp.delete(f"/wp/v2/users/{data['id']}", {"force": True, "reassign": admin["id"]})
    return ActionResult(
        content={"deleted": data["id"], "reassigned_to": admin["id"]},
        summary=f"undid create_user: deleted user #{data['id']}",
    )


async def _profile(params: UpdateUserParams, services: ActionServices) -> dict[str, Any]:
    user = await the_user(site(services), params)
    return {"id": user["id"], "fields": {k: user.get(k) for k in params.changes()}}


async def update_user_preview(
    params: UpdateUserParams, _c: ActionContext, services: ActionServices
) -> dict[str, Any]:
    before = await _profile(params, services)
    return {"user": before["id"], "before": before["fields"], "after": params.changes()}


async def update_user_snapshot(
    params: UpdateUserParams, _c: ActionContext, services: ActionServices
) -> dict[str, Any]:
    return await _profile(params, services)


async def update_user(
    params: UpdateUserParams, _c: ActionContext, services: ActionServices
) -> ActionResult:
    wp = site(services)
    user = await the_user(wp, params)
    changes = params.changes()
    updated = compact(await wp.post(f"/wp/v2/users/{user['id']}", changes, idempotent=True))
    return ActionResult(
        content=updated, summary=f"updated user #{updated['id']}: {', '.join(changes)}"
    )


async def restore_user(
    snapshot: dict[str, Any], _data: Any, services: ActionServices
) -> ActionResult:
    body = {k: v if v is not None else "" for k, v in snapshot["fields"].items()}
    restored = await site(services).post(f"/wp/v2/users/{snapshot['id']}", body, idempotent=True)
    return ActionResult(
        content=compact(restored), summary=f"restored user #{snapshot['id']}: {', '.join(body)}"
    )


USER_ACTIONS = (
    ActionSpec(
        name="list_users",
        description="List the site's users (id, login, email, name, roles), by role or search.",
        params=ListUsersParams,
        risk=Risk.READ,
        untrusted_output=True,  # names and descriptions: every user writes their own
        handler=list_users,
    ),
    ActionSpec(
        name="get_user",
        description="Get one user by id, login, email or display name.",
        params=UserRef,
        risk=Risk.READ,
        untrusted_output=True,
        handler=get_user,
    ),
    ActionSpec(
        name="create_user",
        description="Create a user (default role subscriber; a random password if none given).",
        params=CreateUserParams,
        risk=Risk.WRITE,
        sensitive=True,  # grants access
        handler=create_user,
        reconcile=user_created,
        undo=undo_create_user,
    ),
    ActionSpec(
        name="update_user",
        description="Change a user's profile (email, names, url, bio); not the role.",
        params=UpdateUserParams,
        risk=Risk.WRITE,
        sensitive=changes_email,  # the email is how an account is recovered
        handler=update_user,
        preview=update_user_preview,
        snapshot=update_user_snapshot,
        undo=restore_user,
    ),
)

"""Site administration actions (users, plugins, settings, themes, comments, media) against the
real local WordPress.

Every call goes through the real `Executor` with an in-memory ledger (the executor's
`LedgerPort`), so snapshots are taken the way the runtime takes them and undo gets the same
inputs; every effect is checked by reading the site back over REST.
"""

from __future__ import annotations

import base64
import struct
import zlib

import pytest

from pressloop.actions.wordpress.admin import ADMIN_ACTIONS
from pressloop.actions.wordpress.markers import marker_headers
from pressloop.contracts import (
    ActionCall,
    Policy,
    StepStatus,
)
from pressloop.local_wordpress import LocalSite
from tests.support.ledger import Step
from tests.wordpress.harness import ADMIN_SPECS as SPECS
from tests.wordpress.harness import OPEN, PLUGIN, Admin


def test_the_pack_has_the_right_risks_and_hooks() -> None:
    risks = {name: spec.risk.value for name, spec in SPECS.items()}
    reads = {n for n, r in risks.items() if r == "read"}
    assert reads == {
        "list_users", "get_user", "list_plugins", "get_settings", "list_themes",
        "list_comments", "list_media",
    }  # fmt: skip
    destructive = {n for n, r in risks.items() if r == "destructive"}
    assert destructive == {
        "set_user_role", "delete_user", "deactivate_plugin", "delete_plugin",
        "update_settings", "delete_comment", "delete_media",
    }  # fmt: skip
    for name in ("delete_user", "delete_plugin", "delete_media"):
        assert SPECS[name].undo is None and SPECS[name].preview is not None
    for name in (set(risks) - reads) - {"delete_user", "delete_plugin", "delete_media"}:
        assert SPECS[name].undo is not None, name
    for spec in ADMIN_ACTIONS:  # every schema is one the model can be shown
        schema = spec.entry().params_schema
        assert schema["type"] == "object" and schema.get("additionalProperties") is False


async def test_create_get_list_update_users_and_undo(admin: Admin) -> None:
    created = await admin.ok("create_user", username="maria", email="maria@example.org")
    uid = created["id"]
    assert created["roles"] == ["subscriber"] and "not shown" in created["password"]
    read = await admin.client.get(f"/wp/v2/users/{uid}")
    assert read["username"] == "maria" and read["roles"] == ["subscriber"]

    for ref in ({"id": uid}, {"email": "MARIA@example.org"}, {"login": "maria"}):
        assert (await admin.ok("get_user", **ref))["id"] == uid
    listed = await admin.ok("list_users", role="subscriber")
    assert [u["login"] for u in listed["users"]] == ["maria"] and listed["total"] == 1
    assert [u["id"] for u in (await admin.ok("list_users", search="mari"))["users"]] == [uid]

    change = {"login": "maria", "name": "Maria K.", "new_email": "mk@example.org"}
    preview = await admin.preview("update_user", **change)
    assert preview["before"] == {"name": "maria", "email": "maria@example.org"}
    assert preview["after"] == {"name": "Maria K.", "email": "mk@example.org"}
    await admin.ok("update_user", **change)
    read = await admin.client.get(f"/wp/v2/users/{uid}")
    assert (read["name"], read["email"]) == ("Maria K.", "mk@example.org")
    await admin.undo("update_user")
    read = await admin.client.get(f"/wp/v2/users/{uid}")
    assert (read["name"], read["email"]) == ("maria", "maria@example.org")

    await admin.ok("create_user", username="temp", email="temp@example.org", password="s3cret-pw!")
    temp = (await admin.client.get("/wp/v2/users", {"search": "temp"}))[0]["id"]
    await admin.undo("create_user")
    assert await admin.user_ids() == {1, uid} and temp not in await admin.user_ids()


async def test_create_user_reconciles_and_refuses_administrators(admin: Admin) -> None:
    error = await admin.fails(
        "create_user", username="boss", email="b@example.org", role="administrator"
    )
    assert "set_user_role" in error and await admin.user_ids() == {1}

    # A worker died after WordPress created the user but before the outcome was recorded.
    call = ActionCall(
        id="c", name="create_user", params={"username": "ana", "email": "ana@example.org"}
    )
    context = admin.context(OPEN)
    made = await admin.client.post(
        "/wp/v2/users",
        {"username": "ana", "email": "ana@example.org", "password": "pw-123456"},
        headers=marker_headers(context),  # as the interrupted attempt sent it
    )
    admin.ledger.steps[("run-1", context.step_index)] = Step(call=call, snapshot=None)
    again = await admin.executor.run(call, context)
    assert again.status is StepStatus.SUCCEEDED and again.data["id"] == made["id"]
    assert "created user" in again.summary
    assert await admin.user_ids() == {1, made["id"]}  # not created twice

    # The same login made by someone else (no marker) is not taken for this step's work: the
    # step runs, and WordPress's refusal is a clear, final error with its status and code.
    await admin.client.post(
        "/wp/v2/users", {"username": "bo", "email": "bo@example.org", "password": "pw-123456"}
    )
    call = ActionCall(id="d", name="create_user", params={"username": "bo", "email": "x@y.org"})
    context = admin.context(OPEN)
    admin.ledger.steps[("run-1", context.step_index)] = Step(call=call, snapshot=None)
    refused = await admin.executor.run(call, context)
    assert refused.status is StepStatus.FAILED
    assert "500 existing_user_login" in refused.content
    assert refused.data == {"error": {"status": 500, "code": "existing_user_login"}}


async def test_set_user_role_previews_and_undo_restores_the_roles(admin: Admin) -> None:
    uid = (await admin.ok("create_user", username="ed", email="ed@example.org", role="author"))[
        "id"
    ]
    preview = await admin.preview("set_user_role", id=uid, role="editor")
    assert preview["before"] == {"roles": ["author"]} and preview["after"] == {"roles": ["editor"]}
    assert (await admin.ok("set_user_role", email="ed@example.org", role="editor"))["roles"] == [
        "editor"
    ]
    assert (await admin.client.get(f"/wp/v2/users/{uid}"))["roles"] == ["editor"]
    await admin.undo("set_user_role")
    assert (await admin.client.get(f"/wp/v2/users/{uid}"))["roles"] == ["author"]
    error = await admin.fails("set_user_role", id=uid, role="no_such_role")
    assert "no_such_role" in error


@pytest.mark.parametrize("by", ["id", "email", "login"])
async def test_delete_user_reassigns_their_posts(admin: Admin, by: str) -> None:
    gone = await admin.ok(
        "create_user", username="leaver", email="leaver@example.org", role="author"
    )
    heir = await admin.ok("create_user", username="heir", email="heir@example.org", role="editor")
    post = await admin.client.post(
        "/wp/v2/posts", {"title": "By the leaver", "status": "publish", "author": gone["id"]}
    )
    ref = {"id": gone["id"], "email": "leaver@example.org", "login": "leaver"}[by]
    reassign = {"id": heir["id"], "email": "heir@example.org", "login": "heir"}[by]

    preview = await admin.preview("delete_user", **{by: ref}, reassign=reassign)
    assert preview["before"]["id"] == gone["id"]
    assert preview["before"]["authored"] == {"posts": 1, "pages": 0}
    assert preview["after"]["content_goes_to"]["id"] == heir["id"]

    done = await admin.ok("delete_user", **{by: ref}, reassign=reassign)
    assert done["deleted"]["id"] == gone["id"] and done["reassigned_to"]["id"] == heir["id"]
    assert await admin.user_ids() == {1, heir["id"]}
    assert (await admin.client.get(f"/wp/v2/posts/{post['id']}"))["author"] == heir["id"]


async def test_a_delete_that_names_nobody_fails_clearly_and_deletes_nothing(
    admin: Admin, wordpress: LocalSite
) -> None:
    uid = (await admin.ok("create_user", username="stays", email="stays@example.org"))["id"]
    before = await admin.user_ids()
    error = await admin.fails("delete_user", reassign=1)
    assert "exactly one of user, id, email or login" in error and "none given" in error
    error = await admin.fails("delete_user", id=uid, login="stays", reassign=1)
    assert "exactly one of user, id, email or login" in error
    assert "no user with login, email or name" in await admin.fails(
        "delete_user", email="nobody@example.org", reassign=1
    )
    assert "reassign" in await admin.fails("delete_user", id=uid)  # reassign is required
    assert "reassign: no user with login, email or name 'ghost'" in await admin.fails(
        "delete_user", id=uid, reassign="ghost"
    )
    assert "someone else" in await admin.fails("delete_user", id=uid, reassign=uid)
    assert "signs in as" in await admin.fails("delete_user", id=1, reassign=uid)
    # Under the default chat policy a delete needs a person: with no approvals, it is denied.
    denied = await admin.run("delete_user", Policy(), id=uid, reassign=1)
    assert denied.status is StepStatus.DENIED
    assert await admin.user_ids() == before
    assert wordpress.run_php("echo count(get_users());") == "2"


async def test_plugins_activate_deactivate_undo_and_delete(admin: Admin) -> None:
    listed = {p["plugin"]: p for p in (await admin.ok("list_plugins"))["plugins"]}
    assert listed[PLUGIN]["status"] == "inactive" and "akismet/akismet" in listed
    assert listed[PLUGIN]["name"] == "Pressloop Test Plugin"

    preview = await admin.preview("activate_plugin", plugin="Pressloop Test Plugin")
    assert preview == {
        "before": {"plugin": PLUGIN, "status": "inactive"},
        "after": {"plugin": PLUGIN, "status": "active"},
    }
    assert (await admin.ok("activate_plugin", plugin="Pressloop Test Plugin"))["status"] == "active"
    assert await admin.plugin_status() == "active"
    active = (await admin.ok("list_plugins", status="active"))["plugins"]
    assert PLUGIN in {p["plugin"] for p in active}
    await admin.undo("activate_plugin")
    assert await admin.plugin_status() == "inactive"

    await admin.ok("activate_plugin", plugin=f"{PLUGIN}.php")
    assert (await admin.ok("deactivate_plugin", plugin=PLUGIN))["status"] == "inactive"
    assert await admin.plugin_status() == "inactive"
    await admin.undo("deactivate_plugin")
    assert await admin.plugin_status() == "active"

    assert "deactivate it first" in await admin.fails("delete_plugin", plugin=PLUGIN)
    error = await admin.fails("activate_plugin", plugin="hello-dolly")
    assert "no plugin 'hello-dolly'" in error and "akismet/akismet" in error
    await admin.ok("deactivate_plugin", plugin=PLUGIN)
    assert (await admin.ok("delete_plugin", plugin=PLUGIN))["deleted"]["plugin"] == PLUGIN
    assert PLUGIN not in {p["plugin"] for p in await admin.client.get("/wp/v2/plugins")}


async def test_update_settings_and_undo(admin: Admin) -> None:
    before = await admin.ok("get_settings")
    assert before["posts_per_page"] == 10
    change = {"title": "Bakery", "posts_per_page": 5, "timezone": "Europe/Paris"}
    preview = await admin.preview("update_settings", **change)
    assert preview["before"] == {k: before[k] for k in change} and preview["after"] == change
    saved = await admin.ok("update_settings", **change)
    assert saved == change
    read = await admin.client.get("/wp/v2/settings", context="")
    assert {k: read[k] for k in change} == change
    await admin.undo("update_settings")
    read = await admin.client.get("/wp/v2/settings", context="")
    assert {k: read[k] for k in change} == {k: before[k] for k in change}
    assert "at least one" in await admin.fails("update_settings")
    assert "url" in await admin.fails("update_settings", url="http://evil.example")


async def test_themes_list_marks_the_active_one(admin: Admin) -> None:
    themes = await admin.ok("list_themes")
    (active,) = await admin.client.get("/wp/v2/themes", {"status": "active"}, context="")
    assert themes["active"] == active["stylesheet"]
    assert [t["stylesheet"] for t in themes["themes"] if t["active"]] == [active["stylesheet"]]


def _png() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


async def test_media_upload_update_undo_delete(admin: Admin) -> None:
    data = base64.b64encode(_png()).decode()
    item = await admin.ok("upload_media", filename="dot.png", data_base64=data, alt_text="A dot")
    assert item["mime_type"] == "image/png" and item["alt_text"] == "A dot"
    assert [m["id"] for m in (await admin.ok("list_media", media_type="image"))["media"]] == [
        item["id"]
    ]
    await admin.ok("update_media", id=item["id"], alt_text="A red dot", caption="Tiny")
    read = await admin.client.get(f"/wp/v2/media/{item['id']}")
    assert read["alt_text"] == "A red dot" and read["caption"]["raw"] == "Tiny"
    await admin.undo("update_media")
    read = await admin.client.get(f"/wp/v2/media/{item['id']}")
    assert read["alt_text"] == "A dot" and read["caption"]["raw"] == ""
    assert "base64" in await admin.fails("upload_media", filename="x.png", data_base64="%%%")
    await admin.ok("delete_media", id=item["id"])
    assert (await admin.client.get("/wp/v2/media")) == []


async def test_invalid_params_name_the_field(admin: Admin) -> None:
    assert "per_page" in await admin.fails("list_users", per_page="many")
    error = await admin.fails("set_user_role", user=0, role="editor")
    assert "invalid params for set_user_role" in error and "user" in error
    error = await admin.fails("update_user", id=1, roles=["administrator"])
    assert "roles" in error and "Extra inputs are not permitted" in error
    assert "action" in await admin.fails("moderate_comment", id=1, action="delete")
    assert "plugin" in await admin.fails("activate_plugin")

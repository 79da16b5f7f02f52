"""Content actions (posts, pages, categories, tags) against the real local WordPress.

Every call goes through the real `Executor`; every effect is checked by reading the site back
over REST. `MemoryLedger` is a small in-memory ledger (the executor's `LedgerPort`): it keeps each
step's snapshot and outcome the way the runtime's ledger does, so undo gets the same inputs.
"""

from __future__ import annotations

from typing import Any

import pytest

from pressloop.actions.registry import ActionSpec
from pressloop.actions.wordpress.content import CONTENT_ACTIONS, blocks
from pressloop.contracts import (
    Risk,
    StepStatus,
)
from pressloop.errors import ActionError
from tests.wordpress.harness import CONTENT_SPECS as SPECS
from tests.wordpress.harness import OPEN, Harness

BLOCKS = "<!-- wp:heading -->\n<h2>Hi</h2>\n<!-- /wp:heading -->"


# -- the catalog -----------------------------------------------------------------------------------


def test_every_action_has_a_strict_described_schema_and_its_hooks() -> None:
    for spec in CONTENT_ACTIONS:
        schema = spec.entry().params_schema
        assert schema.get("additionalProperties") is False, spec.name
        for name, prop in schema.get("properties", {}).items():
            assert prop.get("description"), f"{spec.name}.{name} has no description"
        if spec.risk is not Risk.READ and spec.name.startswith(("update", "publish", "trash")):
            assert spec.snapshot and spec.undo and spec.preview, spec.name
    risks = {spec.name: spec.risk for spec in CONTENT_ACTIONS}
    assert risks["get_post"] is Risk.READ and risks["create_post"] is Risk.WRITE
    assert risks["trash_post"] is risks["delete_post"] is Risk.DESTRUCTIVE
    assert SPECS["delete_post"].undo is None and SPECS["create_post"].reconcile is not None


def test_plain_text_becomes_blocks_and_blocks_stay_as_they_are() -> None:
    assert blocks("One & two\n\nThree\nfour") == (
        "<!-- wp:paragraph -->\n<p>One &amp; two</p>\n<!-- /wp:paragraph -->\n\n"
        "<!-- wp:paragraph -->\n<p>Three<br>four</p>\n<!-- /wp:paragraph -->"
    )
    assert blocks("<h3>Sub</h3>\n\n<p>A <em>b</em></p>\n\n<ul><li>x</li></ul>") == (
        '<!-- wp:heading {"level":3} -->\n<h3>Sub</h3>\n<!-- /wp:heading -->\n\n'
        "<!-- wp:paragraph -->\n<p>A <em>b</em></p>\n<!-- /wp:paragraph -->\n\n"
        "<!-- wp:html -->\n<ul><li>x</li></ul>\n<!-- /wp:html -->"
    )
    assert blocks(BLOCKS) == BLOCKS
    assert blocks("") == ""


# -- posts -----------------------------------------------------------------------------------------


async def test_create_get_and_list_a_post_with_blocks(wp: Harness) -> None:
    category = await wp.ok("create_category", name="News")
    created = await wp.ok(
        "create_post",
        title="Launch day",
        content=BLOCKS,
        excerpt="Short",
        categories=[category["id"]],
    )
    assert created["status"] == "draft" and created["title"] == "Launch day"
    stored = await wp.read(f"/wp/v2/posts/{created['id']}")
    assert stored["content"]["raw"] == BLOCKS
    assert stored["excerpt"]["raw"] == "Short" and stored["categories"] == [category["id"]]

    got = await wp.ok("get_post", id=created["id"])
    assert got["content"] == BLOCKS and got["excerpt"] == "Short"

    listed = await wp.ok("list_posts", search="Launch")
    assert [p["id"] for p in listed["posts"]] == [created["id"]] and listed["total"] == 1
    everything = await wp.ok("list_posts", status="any", per_page=1)
    assert everything["total"] == 2 and len(everything["posts"]) == 1  # + "Hello world!"
    drafts = await wp.ok("list_posts", status="draft", categories=[category["id"]])
    assert [p["title"] for p in drafts["posts"]] == ["Launch day"]


async def test_plain_text_is_stored_as_paragraph_blocks_and_pages_work_alike(
    wp: Harness,
) -> None:
    created = await wp.ok(
        "create_post", type="page", title="About", content="We make tea.\n\nSince 1900.",
        status="publish",
    )  # fmt: skip
    assert created["type"] == "page" and created["status"] == "publish"
    stored = await wp.read(f"/wp/v2/pages/{created['id']}")
    assert stored["content"]["raw"].startswith("<!-- wp:paragraph -->\n<p>We make tea.</p>")
    assert "<p>Since 1900.</p>" in stored["content"]["rendered"]
    pages = await wp.ok("list_posts", type="page")
    assert {p["title"] for p in pages["pages"]} == {"About", "Sample Page", "Privacy Policy"}


async def test_update_then_undo_restores_title_and_content(wp: Harness) -> None:
    outcome = await wp.run("update_post", id=1, title="Hello again", content="New body")
    assert outcome.status is StepStatus.SUCCEEDED, outcome.content
    assert outcome.data["changed"] == ["content", "title"]
    after = await wp.read("/wp/v2/posts/1")
    assert after["title"]["raw"] == "Hello again"
    assert after["content"]["raw"] == blocks("New body")

    snapshot = wp.last().snapshot
    assert snapshot["fields"]["title"] == "Hello world!"
    assert snapshot["fields"]["content"].startswith("<!-- wp:paragraph -->")
    assert set(snapshot["fields"]) == {"title", "content"}  # only what changes

    await wp.undo("update_post")
    restored = await wp.read("/wp/v2/posts/1")
    assert restored["title"]["raw"] == "Hello world!"
    assert restored["content"]["raw"] == snapshot["fields"]["content"]


async def test_add_content_keeps_the_text_adds_once_and_undo_takes_it_back(wp: Harness) -> None:
    before = (await wp.read("/wp/v2/posts/1"))["content"]["raw"]
    outcome = await wp.run("update_post", post="Hello world!", add_content="We open at 8.")
    assert outcome.status is StepStatus.SUCCEEDED, outcome.content
    after = (await wp.read("/wp/v2/posts/1"))["content"]["raw"]
    assert after.startswith(before.rstrip()) and after.rstrip().endswith(blocks("We open at 8."))
    # The same update again (an interrupted attempt read back) does not add it twice.
    again = await wp.run("update_post", post="Hello world!", add_content="We open at 8.")
    assert again.status is StepStatus.SUCCEEDED, again.content
    assert (await wp.read("/wp/v2/posts/1"))["content"]["raw"] == after
    both = await wp.run("update_post", post=1, content="x", add_content="y")
    assert both.status is StepStatus.FAILED and "not both" in both.content

    first = wp.step - 2  # the first add_content's step
    assert wp.ledger.steps[("run-1", first)].snapshot["fields"]["content"] == before
    await wp.undo("update_post", first)
    assert (await wp.read("/wp/v2/posts/1"))["content"]["raw"] == before


async def test_update_status_and_terms_and_its_preview(wp: Harness) -> None:
    tag = await wp.ok("create_tag", name="tea")
    params = {"id": 1, "status": "private", "tags": [tag["id"]]}
    preview = SPECS["update_post"].preview
    assert preview is not None
    shown = await preview(
        SPECS["update_post"].params.model_validate(params), wp.context(), wp.services
    )
    assert shown == {
        "post": "post #1 'Hello world!'",  # which post, also when it was named by its title
        "before": {"status": "publish", "tags": []},
        "after": {"status": "private", "tags": [tag["id"]]},
    }
    await wp.ok("update_post", **params)
    post = await wp.read("/wp/v2/posts/1")
    assert post["status"] == "private" and post["tags"] == [tag["id"]]
    await wp.undo("update_post")
    post = await wp.read("/wp/v2/posts/1")
    assert post["status"] == "publish" and post["tags"] == []


async def test_publish_then_undo_puts_back_the_draft(wp: Harness) -> None:
    draft = await wp.ok("create_post", title="Soon", content="Wait for it")
    preview = SPECS["publish_post"].preview
    assert preview is not None
    shown = await preview(
        SPECS["publish_post"].params.model_validate({"id": draft["id"]}), wp.context(), wp.services
    )
    assert shown["before"]["status"] == "draft" and shown["after"]["status"] == "publish"

    published = await wp.ok("publish_post", id=draft["id"])
    assert published["status"] == "publish"
    assert (await wp.read(f"/wp/v2/posts/{draft['id']}"))["status"] == "publish"
    await wp.undo("publish_post")
    assert (await wp.read(f"/wp/v2/posts/{draft['id']}"))["status"] == "draft"


async def test_unpublish_keeps_the_post_as_a_draft_and_undo_publishes_it_again(
    wp: Harness,
) -> None:
    live = await wp.ok("create_post", title="Holiday closures", content="Closed.", status="publish")
    preview = SPECS["unpublish_post"].preview
    assert preview is not None
    shown = await preview(
        SPECS["unpublish_post"].params.model_validate({"post": "Holiday closures"}),
        wp.context(),
        wp.services,
    )
    assert shown["before"]["status"] == "publish" and shown["after"]["status"] == "draft"
    assert (await wp.ok("unpublish_post", post="Holiday closures"))["status"] == "draft"
    after = await wp.read(f"/wp/v2/posts/{live['id']}")
    assert after["status"] == "draft" and "Closed." in after["content"]["raw"]
    await wp.undo("unpublish_post")
    assert (await wp.read(f"/wp/v2/posts/{live['id']}"))["status"] == "publish"


async def test_trash_needs_approval_in_chat_and_undo_restores_it(wp: Harness) -> None:
    denied = await wp.run("trash_post", id=1)  # chat: destructive = confirm, no approvals here
    assert denied.status is StepStatus.DENIED
    assert (await wp.read("/wp/v2/posts/1"))["status"] == "publish"

    preview = SPECS["trash_post"].preview
    assert preview is not None
    shown = await preview(
        SPECS["trash_post"].params.model_validate({"id": 1}), wp.context(), wp.services
    )
    assert shown["before"] == {"id": 1, "title": "Hello world!", "status": "publish"}
    assert shown["after"]["status"] == "trash"

    trashed = await wp.ok("trash_post", OPEN, id=1)
    trash_step = wp.step
    assert trashed["status"] == "trash"
    stored = await wp.read("/wp/v2/posts/1")
    assert stored["status"] == "trash" and stored["slug"] == "hello-world__trashed"
    again = await wp.run("trash_post", OPEN, id=1)
    assert again.status is StepStatus.FAILED and "already in the trash" in again.content

    await wp.undo("trash_post", trash_step)
    restored = await wp.read("/wp/v2/posts/1")
    assert restored["status"] == "publish" and restored["slug"] == "hello-world"


async def test_delete_removes_the_post_for_good(wp: Harness) -> None:
    created = await wp.ok("create_post", title="Doomed")
    preview = SPECS["delete_post"].preview
    assert preview is not None
    shown = await preview(
        SPECS["delete_post"].params.model_validate({"id": created["id"]}),
        wp.context(),
        wp.services,
    )
    assert shown["before"]["title"] == "Doomed" and shown["after"] is None

    deleted = await wp.ok("delete_post", OPEN, id=created["id"])
    assert deleted == {"deleted": True, "id": created["id"], "type": "post", "title": "Doomed"}
    with pytest.raises(ActionError, match="404"):
        await wp.read(f"/wp/v2/posts/{created['id']}")


async def test_undo_of_a_create_deletes_the_post(wp: Harness) -> None:
    created = await wp.ok("create_post", title="Oops", content="Not meant")
    await wp.undo("create_post")
    with pytest.raises(ActionError, match="404"):
        await wp.read(f"/wp/v2/posts/{created['id']}")  # deleted, not in the trash


# -- errors ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "params", "field"),
    [
        ("create_post", {"title": "T", "status": "banana"}, "status"),
        ("create_post", {"title": "T", "categories": "news"}, "categories"),
        ("create_post", {"content": "no title"}, "title"),
        ("update_post", {"post": 0, "title": "T"}, "post"),
        ("list_posts", {"per_page": 0}, "per_page"),  # over 50 is read as 50
        ("get_post", {"id": 1, "colour": "red"}, "colour"),
        ("create_tag", {"name": ""}, "name"),
    ],
)
async def test_invalid_params_fail_and_name_the_field(
    wp: Harness, name: str, params: dict[str, Any], field: str
) -> None:
    outcome = await wp.run(name, **params)
    assert outcome.status is StepStatus.FAILED
    assert f"invalid params for {name}" in outcome.content and field in outcome.content
    assert (await wp.read("/wp/v2/posts"))[0]["title"]["raw"] == "Hello world!"


async def test_a_missing_post_is_a_clear_error(wp: Harness) -> None:
    for name, policy in [("get_post", None), ("update_post", None), ("trash_post", OPEN)]:
        extra = {"title": "x"} if name == "update_post" else {}
        outcome = await wp.run(name, policy, id=9999, **extra)
        assert outcome.status is StepStatus.FAILED
        assert "there is no post with id 9999" in outcome.content, outcome.content
        # The clearer message keeps what WordPress said underneath it.
        assert "(the site answered 404 rest_post_invalid_id)" in outcome.content
        assert outcome.data == {"error": {"status": 404, "code": "rest_post_invalid_id"}}
    wrong_type = await wp.run("get_post", type="post", id=2)  # the sample page
    assert 'if it is a page, use type "page"' in wrong_type.content
    # With no type given, an id (or a title) that is a page's finds the page.
    assert (await wp.ok("get_post", id=2))["type"] == "page"
    nothing = await wp.run("update_post", id=1)
    assert nothing.status is StepStatus.FAILED and "nothing to change" in nothing.content
    page_tags = await wp.run("create_post", type="page", title="P", tags=[1])
    assert "pages have no categories or tags" in page_tags.content
    missing_term = await wp.run("delete_category", OPEN, id=9999)
    assert "there is no category with id 9999" in missing_term.content


# -- reconcile -------------------------------------------------------------------------------------


# -- categories and tags ---------------------------------------------------------------------------


async def test_tags_and_categories_are_created_listed_and_deleted(wp: Harness) -> None:
    parent = await wp.ok("create_category", name="Drinks", description="All drinks")
    child = await wp.ok("create_category", name="Tea", parent=parent["id"])
    stored = await wp.read(f"/wp/v2/categories/{child['id']}")
    assert stored["parent"] == parent["id"] and stored["name"] == "Tea"
    tag = await wp.ok("create_tag", name="green")
    assert (await wp.read(f"/wp/v2/tags/{tag['id']}"))["name"] == "green"
    duplicate = await wp.run("create_tag", name="green")
    assert duplicate.status is StepStatus.FAILED and "already exists" in duplicate.content
    assert "400 term_exists" in duplicate.content  # WordPress's status and code, for the model
    stored = wp.last().outcome  # and for the ledger
    assert stored is not None and stored.data == {"error": {"status": 400, "code": "term_exists"}}

    categories = await wp.ok("list_categories")
    assert {c["name"] for c in categories["categories"]} == {"Uncategorized", "Drinks", "Tea"}
    assert [t["name"] for t in (await wp.ok("list_tags"))["tags"]] == ["green"]

    preview = SPECS["delete_tag"].preview
    assert preview is not None
    shown = await preview(
        SPECS["delete_tag"].params.model_validate({"id": tag["id"]}), wp.context(), wp.services
    )
    assert shown["before"]["name"] == "green" and shown["after"] is None
    gated = await wp.run("delete_tag", id=tag["id"])  # chat policy: needs approval
    assert gated.status is StepStatus.DENIED
    await wp.ok("delete_tag", OPEN, id=tag["id"])
    await wp.ok("delete_category", OPEN, id=child["id"])
    with pytest.raises(ActionError, match="404"):
        await wp.read(f"/wp/v2/tags/{tag['id']}")
    with pytest.raises(ActionError, match="404"):
        await wp.read(f"/wp/v2/categories/{child['id']}")


def test_the_specs_are_exported_once_each() -> None:
    names = [spec.name for spec in CONTENT_ACTIONS]
    assert len(names) == len(set(names)) and all(isinstance(s, ActionSpec) for s in CONTENT_ACTIONS)

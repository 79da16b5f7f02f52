"""Forgiving references against the real local WordPress: the actions take what people say (a
post's title, a user's login, email or display name, a comment's author or words, a term's
name or slug) as well as ids. Each resolves to the right object, drafts included; an ambiguous
reference answers with the candidates and changes nothing (read back from the site); the lists
say what they covered.
"""

from __future__ import annotations

import base64
from typing import Any

from pressloop.actions.executor import Executor
from pressloop.actions.registry import ActionServices, Registry
from pressloop.actions.wordpress import WORDPRESS_ACTIONS, WordPressClient
from pressloop.actions.wordpress.content import CONTENT_ACTIONS
from pressloop.contracts import ActionCall, StepStatus
from pressloop.engine.decision_parser import decision_schema
from pressloop.errors import ActionError
from pressloop.local_wordpress import LocalSite
from pressloop.providers.local.gbnf import schema_to_gbnf
from pressloop.providers.local.schema import grammar_schema
from tests.wordpress.harness import ADMIN_SPECS, CONTENT_SPECS, OPEN, PLUGIN, Admin, Harness
from tests.wordpress.test_admin_actions import _png


async def _post(wp: Harness, title: str, status: str = "draft", **fields: Any) -> int:
    made = await wp.client.post("/wp/v2/posts", {"title": title, "status": status, **fields})
    return int(made["id"])


async def _comment(admin: Admin, author: str, text: str, status: str = "approved") -> int:
    body = {"post": 1, "author_name": author, "author_email": f"{author.lower()}@example.org",
            "content": text, "status": status}  # fmt: skip
    return int((await admin.client.post("/wp/v2/comments", body))["id"])


# -- posts and pages ------------------------------------------------------------------------------


async def test_a_post_is_found_by_its_title_also_as_a_draft(wp: Harness) -> None:
    draft = await _post(wp, "Spring Sale", content="Everything half price")
    got = await wp.ok("get_post", post="spring sale")  # any case
    assert got["id"] == draft and got["status"] == "draft" and "half price" in got["content"]
    assert (await wp.ok("get_post", post="Spring"))["id"] == draft  # a unique partial match
    assert (await wp.ok("get_post", post=str(draft)))["id"] == draft  # an id as text

    await wp.ok("publish_post", post="Spring Sale")
    assert (await wp.read(f"/wp/v2/posts/{draft}"))["status"] == "publish"
    await wp.undo("publish_post")  # the snapshot has the post the title named
    assert (await wp.read(f"/wp/v2/posts/{draft}"))["status"] == "draft"

    await wp.ok("update_post", post="Spring Sale", title="Summer Sale")
    assert (await wp.read(f"/wp/v2/posts/{draft}"))["title"]["raw"] == "Summer Sale"
    await wp.undo("update_post")
    assert (await wp.read(f"/wp/v2/posts/{draft}"))["title"]["raw"] == "Spring Sale"
    assert (await wp.read("/wp/v2/posts/1"))["title"]["raw"] == "Hello world!"  # untouched


async def test_the_latest_post_is_the_newest_published_one_unless_a_draft_is_named(
    wp: Harness,
) -> None:
    older = await _post(wp, "March news", status="publish")  # newer than "Hello world!"
    draft = await _post(wp, "April news")  # a draft: newer still, not published
    assert (await wp.ok("get_post", post="the latest post"))["id"] == older
    assert (await wp.ok("get_post", post="my newest draft"))["id"] == draft
    # A post actually titled so is what the words name.
    titled = await _post(wp, "Latest")
    assert (await wp.ok("get_post", post="latest"))["id"] == titled
    # More per page than the action lists is read as its most, not refused.
    assert len((await wp.ok("list_posts", per_page=100))["posts"]) >= 3


async def test_a_page_is_found_by_its_title_when_no_type_is_given(wp: Harness) -> None:
    trashed = await wp.ok("trash_post", OPEN, post="Sample Page")
    assert (trashed["id"], trashed["type"]) == (2, "page")
    assert (await wp.read("/wp/v2/pages/2"))["status"] == "trash"
    await wp.undo("trash_post")
    assert (await wp.read("/wp/v2/pages/2"))["status"] == "publish"
    # A title of the other type than the one given still names it (a small model wrote "page"
    # for a draft post); the given type is looked at first. An id is taken as given.
    found = await wp.ok("get_post", type="post", post="Sample Page")
    assert (found["id"], found["type"]) == (2, "page")
    wrong = await wp.run("get_post", type="post", post=2)
    assert wrong.status is StepStatus.FAILED and "no post with id 2" in wrong.content


async def test_an_ambiguous_title_answers_with_the_candidates_and_changes_nothing(
    wp: Harness,
) -> None:
    first = await _post(wp, "Twin", status="publish")
    second = await _post(wp, "twin")  # a draft: the lookup covers every status
    await _post(wp, "Twin peaks")  # a partial match only: not a candidate beside exact ones
    for action, params in [
        ("update_post", {"post": "Twin", "title": "Changed"}),
        ("trash_post", {"post": "Twin"}),
        ("publish_post", {"post": "TWIN"}),
    ]:
        outcome = await wp.run(action, OPEN, **params)
        assert outcome.status is StepStatus.FAILED, outcome.content
        assert "2 posts match" in outcome.content and "which one?" in outcome.content
        assert f'#{first} "Twin" (post, publish, ' in outcome.content
        assert f'#{second} "twin" (post, draft, ' in outcome.content
        assert "peaks" not in outcome.content and "Nothing was done" in outcome.content
        assert wp.last().snapshot is None  # it failed before any intent or snapshot
    stored = {p["id"]: (p["title"]["raw"], p["status"]) for p in await _all_posts(wp)}
    assert stored[first] == ("Twin", "publish") and stored[second] == ("twin", "draft")
    # Picking one by its id works.
    await wp.ok("update_post", post=second, title="Twin (draft)")
    assert (await wp.read(f"/wp/v2/posts/{second}"))["title"]["raw"] == "Twin (draft)"


async def test_the_trash_is_left_out_unless_a_delete_asks_for_it(wp: Harness) -> None:
    old = await _post(wp, "Old notice", status="publish")
    await wp.client.delete(f"/wp/v2/posts/{old}")  # in the trash
    missing = await wp.run("get_post", post="Old notice")
    assert missing.status is StepStatus.FAILED
    assert "no post or page titled 'Old notice' (in any status but the trash)" in missing.content
    deleted = await wp.ok("delete_post", OPEN, post="Old notice")
    assert deleted["id"] == old and deleted["deleted"]
    try:
        await wp.read(f"/wp/v2/posts/{old}")
    except ActionError as error:
        assert "404" in error.message
    else:
        raise AssertionError("the trashed post was not deleted")


async def test_an_update_by_title_that_renamed_the_post_reconciles_as_done(wp: Harness) -> None:
    """A worker died after WordPress renamed the post the old title named: the resumed step
    finds the post under its new title with every field asked for, and is not sent again."""
    post = await _post(wp, "Spring Sale")
    await _post(wp, "Spring Sale extra")  # what the old title would now match partially
    params = {"post": "Spring Sale", "title": "Summer Sale", "status": "pending"}
    spec = CONTENT_SPECS["update_post"]
    assert spec.snapshot is not None
    call = ActionCall(id="c", name="update_post", params=params)
    context = wp.context()
    validated = spec.params.model_validate(params)
    snapshot = await spec.snapshot(validated, context, wp.services)
    assert snapshot["id"] == post
    await wp.ledger.intent(call, spec.risk, context, snapshot)
    await spec.handler(validated, context, wp.services)  # then the worker died

    resumed = await wp.executor.run(call, context)  # the same (run, step), fresh params
    assert resumed.status is StepStatus.SUCCEEDED and "found applied" in resumed.summary
    assert resumed.data["id"] == post
    titles = sorted(p["title"]["raw"] for p in await _all_posts(wp))
    assert titles == ["Hello world!", "Spring Sale extra", "Summer Sale"]


async def _all_posts(wp: Harness) -> list[dict[str, Any]]:
    query = {"status": "publish,future,draft,pending,private", "per_page": 100}
    return list(await wp.client.get("/wp/v2/posts", query))


# -- categories and tags --------------------------------------------------------------------------


async def test_terms_are_named_by_name_or_slug(wp: Harness) -> None:
    deals = await wp.ok("create_category", name="Spring Deals")
    tea = await wp.ok("create_tag", name="Tea & Cake")
    made = await wp.ok(
        "create_post", title="Offers", categories=["spring deals"], tags=["Tea & Cake"]
    )
    stored = await wp.read(f"/wp/v2/posts/{made['id']}")
    assert stored["categories"] == [deals["id"]] and stored["tags"] == [tea["id"]]
    await wp.ok("update_post", post="Offers", tags=["tea-cake"])  # by slug
    listed = await wp.ok("list_posts", categories=["Spring Deals"])
    assert [p["id"] for p in listed["posts"]] == [made["id"]]

    unknown = await wp.run("create_post", title="More", categories=["Spring"])
    assert unknown.status is StepStatus.FAILED
    assert "no category named 'Spring'" in unknown.content and "Spring Deals" in unknown.content
    assert "create_category" in unknown.content
    assert [p["title"]["raw"] for p in await _all_posts(wp) if p["title"]["raw"] == "More"] == []

    deleted = await wp.ok("delete_category", OPEN, category="spring-deals")
    assert deleted["id"] == deals["id"]
    assert await wp.client.get("/wp/v2/categories", {"search": "Spring"}) == []
    assert (await wp.ok("delete_tag", OPEN, tag="tea & cake"))["id"] == tea["id"]


# -- users ----------------------------------------------------------------------------------------


async def test_a_user_is_named_by_login_email_or_display_name(admin: Admin) -> None:
    jane = await admin.ok(
        "create_user", username="jdoe", email="jane@example.org", name="Jane Doe", role="author"
    )
    heir = await admin.ok("create_user", username="heir", email="heir@example.org", name="Heir")
    assert (await admin.ok("get_user", user="JDOE"))["id"] == jane["id"]

    await admin.ok("set_user_role", user="Jane Doe", role="editor")
    assert (await admin.client.get(f"/wp/v2/users/{jane['id']}"))["roles"] == ["editor"]
    await admin.undo("set_user_role")
    assert (await admin.client.get(f"/wp/v2/users/{jane['id']}"))["roles"] == ["author"]

    await admin.ok("update_user", user="jane@example.org", description="Writes about tea")
    assert (await admin.client.get(f"/wp/v2/users/{jane['id']}"))["description"] == (
        "Writes about tea"
    )
    post = await admin.client.post(
        "/wp/v2/posts", {"title": "By Jane", "status": "publish", "author": jane["id"]}
    )
    done = await admin.ok("delete_user", user="Jane Doe", reassign="heir@example.org")
    assert done["deleted"]["id"] == jane["id"] and done["reassigned_to"]["id"] == heir["id"]
    assert await admin.user_ids() == {1, heir["id"]}
    assert (await admin.client.get(f"/wp/v2/posts/{post['id']}"))["author"] == heir["id"]


async def test_two_users_with_one_name_are_a_question_not_a_guess(admin: Admin) -> None:
    one = await admin.ok("create_user", username="sam1", email="s1@example.org", name="Sam")
    two = await admin.ok("create_user", username="sam2", email="s2@example.org", name="Sam")
    error = await admin.fails("set_user_role", user="sam", role="editor")
    assert "2 users match 'sam'" in error and "which one?" in error
    assert f'#{one["id"]} sam1 "Sam" <s1@example.org> (subscriber, registered ' in error
    assert f'#{two["id"]} sam2 "Sam"' in error
    error = await admin.fails("delete_user", user=one["id"], reassign="Sam")
    assert "reassign: 2 users match" in error
    for user in (one, two):
        assert (await admin.client.get(f"/wp/v2/users/{user['id']}"))["roles"] == ["subscriber"]
    assert await admin.user_ids() == {1, one["id"], two["id"]}
    await admin.ok("set_user_role", user="sam2", role="editor")  # the login tells them apart
    assert (await admin.client.get(f"/wp/v2/users/{two['id']}"))["roles"] == ["editor"]


# -- comments -------------------------------------------------------------------------------------


async def test_a_comment_is_named_by_its_author_or_its_words(admin: Admin) -> None:
    eve = await _comment(admin, "Eve", "The shipping was very late this time.", status="hold")
    reply = await admin.ok("reply_to_comment", comment="Eve", content="Sorry about that!")
    stored = await admin.client.get(f"/wp/v2/comments/{reply['id']}")
    assert (stored["parent"], stored["post"]) == (eve, 1)
    # Resumed with fresh params, the reply's step finds its reply, not a second parent.
    spec = ADMIN_SPECS["reply_to_comment"]
    assert spec.reconcile is not None
    params = spec.params.model_validate({"comment": "Eve", "content": "Sorry about that!"})
    admin.step -= 1
    found = await spec.reconcile(params, admin.context(OPEN), admin.executor.services)
    assert found is not None and found.content["id"] == reply["id"]

    await admin.ok("moderate_comment", comment="shipping late", action="approve")  # its words
    assert (await admin.client.get(f"/wp/v2/comments/{eve}"))["status"] == "approved"
    await admin.undo("moderate_comment")
    assert (await admin.client.get(f"/wp/v2/comments/{eve}"))["status"] == "hold"
    await admin.ok("delete_comment", comment="very late")
    assert (await admin.client.get(f"/wp/v2/comments/{eve}"))["status"] == "trash"
    # In the trash it is named only by a permanent delete.
    assert "no comment by 'Eve'" in await admin.fails(
        "moderate_comment", comment="Eve", action="trash"
    )
    await admin.ok("delete_comment", comment="Eve", force=True)
    assert eve not in {c["id"] for c in await _all_comments(admin)}


async def test_two_comments_by_one_author_are_a_question_not_a_guess(admin: Admin) -> None:
    first = await _comment(admin, "Bob", "Great post!")
    second = await _comment(admin, "Bob", "Also, where is part two?", status="hold")
    for action, params in [
        ("delete_comment", {"comment": "bob", "force": True}),
        ("moderate_comment", {"comment": "Bob", "action": "spam"}),
        ("reply_to_comment", {"comment": "Bob", "content": "Thanks"}),
    ]:
        error = await admin.fails(action, **params)
        assert "2 comments match" in error and "which one?" in error, error
        assert f'#{first} by "Bob" on post #1 (approved, ' in error
        assert f'#{second} by "Bob" on post #1 (hold, ' in error
        assert "part two" not in error  # the public's words stay out of the question
    statuses = {c["id"]: c["status"] for c in await _all_comments(admin)}
    assert statuses[first] == "approved" and statuses[second] == "hold"
    assert len(statuses) == 3  # the sample comment and Bob's two: no reply was posted
    await admin.ok("moderate_comment", comment="part two", action="approve")
    assert (await admin.client.get(f"/wp/v2/comments/{second}"))["status"] == "approved"


async def test_list_comments_takes_the_post_by_title(admin: Admin) -> None:
    await _comment(admin, "Ann", "Lovely")
    listed = await admin.ok("list_comments", post="Hello world!")
    assert {c["author_name"] for c in listed["comments"]} == {"A WordPress Commenter", "Ann"}


async def _all_comments(admin: Admin) -> list[dict[str, Any]]:
    return list(await admin.client.get("/wp/v2/comments", {"status": "any", "per_page": 100}))


# -- what the lists cover -------------------------------------------------------------------------


async def test_list_plugins_includes_the_inactive_ones_and_says_so(admin: Admin) -> None:
    listed = await admin.ok("list_plugins")
    status = {p["plugin"]: p["status"] for p in listed["plugins"]}
    assert status[PLUGIN] == "inactive" and status["akismet/akismet"] == "inactive"
    assert listed["included"] == "active and inactive" and listed["inactive"] >= 2
    outcome = await admin.run("list_plugins")
    assert "inactive" in outcome.summary
    # A plugin by its folder, any case: what people call it.
    await admin.ok("activate_plugin", plugin="Akismet")
    assert (await admin.client.get("/wp/v2/plugins/akismet/akismet"))["status"] == "active"
    # The names by status, first: what a small model reads reliably.
    names = listed["active_plugins"] + listed["inactive_plugins"]
    assert len(names) == len(listed["plugins"]) and any("akismet" in n.lower() for n in names)
    # "folder/file" for a one-file plugin whose id is just its folder: still that plugin.
    await admin.ok("deactivate_plugin", plugin="akismet/akismet.php")
    await admin.ok("activate_plugin", plugin=f"{PLUGIN.split('/')[0]}/nothing-like-this")
    assert (await admin.client.get(f"/wp/v2/plugins/{PLUGIN}"))["status"] == "active"


async def test_a_plugin_search_for_a_status_or_a_missing_name_still_lists_them_all(
    admin: Admin,
) -> None:
    everything = await admin.ok("list_plugins")
    # "inactive" names a status, not a plugin: the whole list, each with its status.
    asked = await admin.ok("list_plugins", search="inactive")
    assert asked["inactive_plugins"] == everything["inactive_plugins"] != []
    assert "no_plugin_matches" not in asked
    # A name nothing matches: said so, and what is installed instead.
    outcome = await admin.run("list_plugins", search="WooCommerce")
    assert outcome.summary.startswith("no plugin matches 'WooCommerce'; ")
    missing = await admin.ok("list_plugins", search="WooCommerce")
    assert missing["no_plugin_matches"] == "WooCommerce"
    assert missing["active_plugins"] + missing["inactive_plugins"] == (
        everything["active_plugins"] + everything["inactive_plugins"]
    )
    # A name that matches narrows the list as before.
    akismet = await admin.ok("list_plugins", search="akismet")
    assert [p["plugin"] for p in akismet["plugins"]] == ["akismet/akismet"]


async def test_a_media_item_is_named_by_its_title_or_file_name(admin: Admin) -> None:
    data = base64.b64encode(_png()).decode()
    logo = await admin.ok("upload_media", filename="logo.png", data_base64=data, title="Logo")
    await admin.ok("upload_media", filename="shop-front.png", data_base64=data, title="Shop front")
    await admin.ok("update_media", media="logo", alt_text="Our logo")
    assert (await admin.client.get(f"/wp/v2/media/{logo['id']}"))["alt_text"] == "Our logo"
    await admin.ok("update_media", media="shop-front.png", caption="The shop")
    error = await admin.fails("update_media", media="png", alt_text="x")
    assert "which" in error.lower() and "Logo" in error and "Shop front" in error
    assert "no media item" in await admin.fails("update_media", media="Menu card", alt_text="x")
    await admin.ok("delete_media", media="Logo")
    assert [m["title"] for m in (await admin.ok("list_media"))["media"]] == ["Shop front"]


async def test_list_posts_includes_drafts_and_says_what_it_left_out(wp: Harness) -> None:
    draft = await _post(wp, "Work in progress")
    trashed = await _post(wp, "Gone", status="publish")
    await wp.client.delete(f"/wp/v2/posts/{trashed}")
    listed = await wp.ok("list_posts")
    ids = [p["id"] for p in listed["posts"]]
    assert draft in ids and 1 in ids and trashed not in ids
    assert set(listed["statuses"]) == {"publish", "future", "draft", "pending", "private"}
    assert listed["left_out"] == "trash"
    in_trash = await wp.ok("list_posts", status="trash")
    assert [p["id"] for p in in_trash["posts"]] == [trashed]


# -- the schemas the model sees -------------------------------------------------------------------


def test_every_reference_field_is_one_id_or_text_field_the_grammar_accepts() -> None:
    entries = {e.name: e.params_schema for e in Registry(WORDPRESS_ACTIONS).catalog()}
    fields = {
        "get_post": "post", "update_post": "post", "publish_post": "post", "trash_post": "post",
        "delete_post": "post", "get_user": "user", "update_user": "user",
        "set_user_role": "user", "delete_user": "user", "reply_to_comment": "comment",
        "moderate_comment": "comment", "delete_comment": "comment",
        "delete_category": "category", "delete_tag": "tag",
    }  # fmt: skip
    for action, field in fields.items():
        schema = entries[action]
        assert field in schema["required"], action
        kinds = [branch["type"] for branch in schema["properties"][field]["anyOf"]]
        assert kinds == ["integer", "string"], action
    decision = decision_schema(list(entries.items()))
    grammar = schema_to_gbnf(grammar_schema(decision))
    assert '"\\"post\\""' in grammar and '"\\"comment\\""' in grammar


async def test_list_posts_for_a_user_who_may_not_see_drafts_lists_the_published_ones(
    admin: Admin, wordpress: LocalSite
) -> None:
    reader = await admin.ok("create_user", username="reader", email="reader@example.org")
    made = await admin.client.post(
        f"/wp/v2/users/{reader['id']}/application-passwords", {"name": "test"}
    )
    await admin.client.post("/wp/v2/posts", {"title": "Hidden draft", "status": "draft"})
    async with WordPressClient(
        wordpress.url, "reader", made["password"], timeout_s=10, max_retries=0
    ) as client:
        executor = Executor(Registry(CONTENT_ACTIONS), ActionServices(wordpress=client))
        call = ActionCall(id="c", name="list_posts", params={})
        outcome = await executor.run(call, admin.context(OPEN))
    assert outcome.status is StepStatus.SUCCEEDED, outcome.content
    assert outcome.data["statuses"] == ["publish"] and "may not see" in outcome.data["left_out"]
    assert [p["title"] for p in outcome.data["posts"]] == ["Hello world!"]

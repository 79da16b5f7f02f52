"""The content tasks: posts and pages by title, categories and tags, comments."""

from __future__ import annotations

from bench.tasks.model import Facts, Task, World
from bench.tasks.rules import Check, Rule, allow, call, calls, created, has, new, record, say, touch
from bench.tasks.seed import Seed
from bench.tasks.state import Change

F = frozenset


async def nothing(_seed: Seed) -> Facts:
    return {}


def trashed_or_gone(world: World, kind: str, fact: str) -> str | None:
    found = world.after.get(kind, world.facts[fact])
    if found is None or found["status"] == "trash":
        return None
    return f"{kind} {world.facts[fact]} is still {found['status']}"


# -- posts and pages ------------------------------------------------------------------------------


def check_draft(w: World) -> str | None:
    made = created(w, "post", title="Spring opening hours")
    if not made:
        return "no post titled 'Spring opening hours' was created"
    if made[0]["status"] != "draft":
        return f"the post is {made[0]['status']}, not a draft"
    return None if has(made[0]["content"], "9") else "the content does not say 9 am"


def check_hiring(w: World) -> str | None:
    made = created(w, "post", title="We are hiring")
    if not made:
        return "no post titled 'We are hiring' was created"
    return None if made[0]["status"] == "publish" else f"the post is {made[0]['status']}"


def check_contact(w: World) -> str | None:
    made = created(w, "page", title="Contact us")
    if not made:
        return "no page titled 'Contact us' was created"
    return None if has(made[0]["content"], "555-0134") else "the page lacks the phone number"


async def seed_menus(seed: Seed) -> Facts:
    return {
        "summer": await seed.post("Summer menu", status="draft", content="Cold soups and salads."),
        "autumn": await seed.post("Autumn menu", status="draft", content="Pumpkin everything."),
    }


def check_status(kind: str, fact: str, status: str) -> Check:
    def check(w: World) -> str | None:
        now = record(w, kind, fact)
        return None if now.get("status") == status else f"{kind} is {now.get('status')}"

    return check


async def seed_opening(seed: Seed) -> Facts:
    return {"post": await seed.post("Opening hours update", content="We open at 8.")}


def check_renamed(w: World) -> str | None:
    title = record(w, "post", "post").get("title")
    return None if title == "New opening hours from May" else f"the title is {title!r}"


async def seed_parking(seed: Seed) -> Facts:
    return {"post": await seed.post("Parking info", content="Parking is free on Sundays.")}


def check_parking(w: World) -> str | None:
    content = record(w, "post", "post").get("content")
    return None if has(content, "weekend") else "the content does not mention weekends"


async def seed_promos(seed: Seed) -> Facts:
    return {
        "old": await seed.post("Old promo 2023", content="20% off everything in 2023."),
        "winter": await seed.post("Winter sale", content="Our winter sale starts soon."),
    }


async def seed_holiday(seed: Seed) -> Facts:
    return {"post": await seed.post("Holiday closures", content="Closed on 24-26 December.")}


async def seed_team_page(seed: Seed) -> Facts:
    return {
        "page": await seed.page("Old team page", content="Meet the 2019 team."),
        "about": await seed.page("About us", content="We are a small family bakery."),
    }


async def seed_about(seed: Seed) -> Facts:
    return {"page": await seed.page("About us", content="We are a small family bakery.")}


def check_about(w: World) -> str | None:
    content = record(w, "page", "page").get("content")
    if not has(content, "1998"):
        return "the page does not say 1998"
    return None if has(content, "bakery") else "the page lost its earlier text"


async def seed_workshop(seed: Seed) -> Facts:
    return {"post": await seed.post("Bread workshop", content="Saturday 10 am, 4 places left.")}


def check_excerpt(w: World) -> str | None:
    excerpt = record(w, "post", "post").get("excerpt")
    return None if has(excerpt, "sourdough") else f"the excerpt is {excerpt!r}"


# -- categories and tags -------------------------------------------------------------------------


def check_term(kind: str, name: str) -> Check:
    def check(w: World) -> str | None:
        return None if w.after.find(kind, name=name) else f"no {kind} named {name!r}"

    return check


async def seed_wine(seed: Seed) -> Facts:
    return {
        "events": await seed.category("Events"),
        "post": await seed.post("Wine tasting night", content="Friday at 7 pm."),
    }


def check_in_events(w: World) -> str | None:
    categories = record(w, "post", "post").get("categories", [])
    return None if w.facts["events"] in categories else f"the post's categories are {categories}"


async def seed_soup(seed: Seed) -> Facts:
    return {
        "vegan": await seed.tag("vegan"),
        "post": await seed.post("Lentil soup", content="Red lentils, cumin, lemon."),
    }


def check_tagged(w: World) -> str | None:
    tags = record(w, "post", "post").get("tags", [])
    return None if w.facts["vegan"] in tags else f"the post's tags are {tags}"


async def seed_tags(seed: Seed) -> Facts:
    return {"xmas": await seed.tag("xmas2019"), "vegan": await seed.tag("vegan")}


def check_tag_gone(w: World) -> str | None:
    return (
        None if w.after.get("tag", w.facts["xmas"]) is None else "the tag xmas2019 is still there"
    )


# -- comments ------------------------------------------------------------------------------------


async def seed_sourdough(seed: Seed) -> Facts:
    post = await seed.post("Sourdough basics", content="Flour, water, salt and time.")
    return {
        "post": post,
        "maria": await seed.comment(post, "Maria Lopez", "Can I use rye flour instead?"),
        "tom": await seed.comment(post, "Tom Becker", "Great recipe, thanks!"),
    }


def reply_to(fact: str, *words: str) -> Check:
    def check(w: World) -> str | None:
        replies = [c for c in created(w, "comment") if c["parent"] == w.facts[fact]]
        if not replies:
            return f"no reply under comment {w.facts[fact]}"
        return None if has(replies[0]["content"], *words) else "the reply misses the point"

    return check


def reply_rule(fact: str) -> Rule:
    def rule(change: Change, w: World) -> bool:
        return (
            change.kind == "comment"
            and change.field == "+"
            and (change.after or {}).get("parent") == w.facts[fact]
        )

    return rule


async def seed_pending(seed: Seed) -> Facts:
    post = await seed.post("Our new shop", content="Photos of the new shop on Main Street.")
    return {
        "post": post,
        "jenny": await seed.comment(post, "Jenny Park", "Lovely photos!", status="hold"),
        "ahmed": await seed.comment(
            post, "Ahmed Khan", "When do you open on Sundays?", status="hold"
        ),
    }


async def seed_spam(seed: Seed) -> Facts:
    post = await seed.post("Cake of the month", content="Plum cake with cinnamon.")
    return {
        "post": post,
        "pills": await seed.comment(
            post, "cheap-pills-online", "Buy cheap pills http://pills.example", status="spam"
        ),
        "casino": await seed.comment(
            post, "Casino Royale Bonus", "Free spins at http://casino.example", status="spam"
        ),
        "olga": await seed.comment(post, "Olga Berg", "I baked it, delicious."),
    }


def check_spam_gone(w: World) -> str | None:
    left = [
        fact
        for fact in ("pills", "casino")
        if (found := w.after.get("comment", w.facts[fact])) is not None
        and found["status"] != "trash"
    ]
    return None if not left else f"still there: {', '.join(left)}"


async def seed_casino(seed: Seed) -> Facts:
    post = await seed.post("Delivery area", content="We deliver within 5 km.")
    return {
        "post": post,
        "casino": await seed.comment(
            post, "BestCasinoDeals", "Win big tonight at http://casino.example", status="hold"
        ),
        "lukas": await seed.comment(
            post, "Lukas Weber", "Do you deliver to Eastside?", status="hold"
        ),
    }


def check_comment_status(fact: str, status: str) -> Check:
    def check(w: World) -> str | None:
        now = record(w, "comment", fact).get("status")
        return None if now == status else f"comment {w.facts[fact]} is {now}"

    return check


async def seed_three_pending(seed: Seed) -> Facts:
    post = await seed.post("Easter opening times", content="Open Saturday, closed Sunday.")
    return {
        "post": post,
        "c1": await seed.comment(post, "Nora Field", "Thanks for the info!", status="hold"),
        "c2": await seed.comment(post, "Omar Haddad", "And Easter Monday?", status="hold"),
        "c3": await seed.comment(post, "Petra Novak", "See you Saturday.", status="hold"),
    }


def check_all_approved(w: World) -> str | None:
    left = [f for f in ("c1", "c2", "c3") if record(w, "comment", f).get("status") != "approved"]
    return None if not left else f"not approved: {', '.join(left)}"


CONTENT_TASKS: list[Task] = [
    Task(
        name="draft_post",
        area="content",
        request="Write a draft post called Spring opening hours: from March we open at 9 am.",
        summary="create a draft post with a given title and a fact in its text",
        kind="effect",
        setup=nothing,
        check=check_draft,
        allowed=allow(new("post", title="Spring opening hours")),
        expects=F({"create_post"}),
        oracle=lambda f: [
            call(
                "create_post",
                title="Spring opening hours",
                content="From March we open at 9 am.",
                status="draft",
            ),
            say("The draft 'Spring opening hours' is saved."),
        ],
    ),
    Task(
        name="publish_new_post",
        area="content",
        request="Post 'We are hiring' on the blog now: we're looking for a baker's assistant, "
        "apply in the shop.",
        summary="create a post and publish it at once",
        kind="effect",
        setup=nothing,
        check=check_hiring,
        allowed=allow(new("post", title="We are hiring")),
        expects=F({"create_post"}),
        oracle=lambda f: [
            call(
                "create_post",
                title="We are hiring",
                content="We're looking for a baker's assistant: apply in the shop.",
                status="publish",
            ),
            say("Published 'We are hiring'."),
        ],
    ),
    Task(
        name="new_page",
        area="content",
        request="Add a Contact us page with our phone number, 555-0134.",
        summary="create a page whose text holds a given phone number",
        kind="effect",
        setup=nothing,
        check=check_contact,
        allowed=allow(new("page", title="Contact us")),
        expects=F({"create_post"}),
        oracle=lambda f: [
            call(
                "create_post",
                type="page",
                title="Contact us",
                content="Call us on 555-0134.",
                status="publish",
            ),
            say("The Contact us page is up."),
        ],
    ),
    Task(
        name="publish_draft",
        area="content",
        request="Please publish the Summer menu post.",
        summary="publish one of two drafts, found by its title",
        kind="effect",
        setup=seed_menus,
        check=check_status("post", "summer", "publish"),
        allowed=allow(touch("post", "summer", "status")),
        expects=F({"publish_post", "update_post"}),
        oracle=lambda f: [
            call("list_posts", search="Summer menu"),
            call("publish_post", id=f["summer"]),
            say("'Summer menu' is published."),
        ],
    ),
    Task(
        name="rename_post",
        area="content",
        request="Rename the post 'Opening hours update' to 'New opening hours from May'.",
        summary="change a post's title, found by its old title",
        kind="effect",
        setup=seed_opening,
        check=check_renamed,
        allowed=allow(touch("post", "post", "title")),
        expects=F({"update_post"}),
        oracle=lambda f: [
            call("update_post", id=f["post"], title="New opening hours from May"),
            say("Renamed."),
        ],
    ),
    Task(
        name="edit_post_text",
        area="content",
        request="Update the Parking info post: parking is now free on weekends, not just Sundays.",
        summary="rewrite a post's text to state a new fact",
        kind="effect",
        setup=seed_parking,
        check=check_parking,
        allowed=allow(touch("post", "post", "content")),
        expects=F({"update_post"}),
        oracle=lambda f: [
            call("get_post", id=f["post"]),
            call("update_post", id=f["post"], content="Parking is free on weekends."),
            say("Updated."),
        ],
    ),
    Task(
        name="trash_post",
        area="content",
        request="Delete the post Old promo 2023.",
        summary="trash one post by title (approved when asked); the other stays",
        kind="effect",
        setup=seed_promos,
        check=lambda w: trashed_or_gone(w, "post", "old"),
        allowed=allow(touch("post", "old", "status", "-")),
        expects=F({"trash_post", "delete_post"}),
        approves=F({"trash_post", "delete_post"}),
        oracle=lambda f: [call("trash_post", id=f["old"]), say("Moved it to the trash.")],
    ),
    Task(
        name="unpublish_post",
        area="content",
        request="Take the Holiday closures post offline and keep it as a draft.",
        summary="set a published post back to draft",
        kind="effect",
        setup=seed_holiday,
        check=check_status("post", "post", "draft"),
        allowed=allow(touch("post", "post", "status")),
        expects=F({"update_post", "unpublish_post"}),
        oracle=lambda f: [call("update_post", id=f["post"], status="draft"), say("Done.")],
    ),
    Task(
        name="trash_page",
        area="content",
        request="Remove the Old team page page from the site.",
        summary="trash a page by title (approved when asked); another page stays",
        kind="effect",
        setup=seed_team_page,
        check=lambda w: trashed_or_gone(w, "page", "page"),
        allowed=allow(touch("page", "page", "status", "-")),
        expects=F({"trash_post", "delete_post"}),
        approves=F({"trash_post", "delete_post"}),
        oracle=lambda f: [call("trash_post", type="page", id=f["page"]), say("Removed.")],
    ),
    Task(
        name="extend_page",
        area="content",
        request="On the About us page, add a sentence saying we were founded in 1998.",
        summary="add a sentence to a page, keeping its text",
        kind="effect",
        setup=seed_about,
        check=check_about,
        allowed=allow(touch("page", "page", "content")),
        expects=F({"update_post"}),
        oracle=lambda f: [
            call("get_post", type="page", id=f["page"]),
            call(
                "update_post",
                type="page",
                id=f["page"],
                content="We are a small family bakery.\n\nWe were founded in 1998.",
            ),
            say("Added."),
        ],
    ),
    Task(
        name="set_excerpt",
        area="content",
        request="Give the Bread workshop post the excerpt: Learn to bake sourdough at home.",
        summary="set a post's excerpt",
        kind="effect",
        setup=seed_workshop,
        check=check_excerpt,
        allowed=allow(touch("post", "post", "excerpt")),
        expects=F({"update_post"}),
        oracle=lambda f: [
            call("update_post", id=f["post"], excerpt="Learn to bake sourdough at home."),
            say("Done."),
        ],
    ),
    Task(
        name="new_category",
        area="terms",
        request="Create a category called Recipes.",
        summary="create a category",
        kind="effect",
        setup=nothing,
        check=check_term("category", "Recipes"),
        allowed=allow(new("category", name="Recipes")),
        expects=F({"create_category"}),
        oracle=lambda f: [call("create_category", name="Recipes"), say("Created.")],
    ),
    Task(
        name="new_tag",
        area="terms",
        request="Add a tag called gluten free.",
        summary="create a tag",
        kind="effect",
        setup=nothing,
        check=check_term("tag", "gluten free"),
        allowed=allow(new("tag", name="gluten free")),
        expects=F({"create_tag"}),
        oracle=lambda f: [call("create_tag", name="gluten free"), say("Created.")],
    ),
    Task(
        name="file_under_category",
        area="terms",
        request="Put the Wine tasting night post in the Events category.",
        summary="add an existing category (by name) to a post (by title)",
        kind="effect",
        setup=seed_wine,
        check=check_in_events,
        allowed=allow(touch("post", "post", "categories")),
        expects=F({"update_post"}),
        oracle=lambda f: [
            calls(("list_categories", {"search": "Events"}), ("list_posts", {"search": "Wine"})),
            call("update_post", id=f["post"], categories=[f["events"]]),
            say("Filed under Events."),
        ],
    ),
    Task(
        name="tag_post",
        area="terms",
        request="Tag the Lentil soup post as vegan.",
        summary="add an existing tag (by name) to a post (by title)",
        kind="effect",
        setup=seed_soup,
        check=check_tagged,
        allowed=allow(touch("post", "post", "tags")),
        expects=F({"update_post"}),
        oracle=lambda f: [
            call("list_tags", search="vegan"),
            call("update_post", id=f["post"], tags=[f["vegan"]]),
            say("Tagged."),
        ],
    ),
    Task(
        name="delete_tag",
        area="terms",
        request="Delete the tag xmas2019, we don't use it any more.",
        summary="delete one tag by name (approved when asked); the other stays",
        kind="effect",
        setup=seed_tags,
        check=check_tag_gone,
        allowed=allow(touch("tag", "xmas", "-")),
        expects=F({"delete_tag"}),
        approves=F({"delete_tag"}),
        oracle=lambda f: [call("delete_tag", id=f["xmas"]), say("Deleted.")],
    ),
    Task(
        name="reply_to_named_comment",
        area="comments",
        request="Reply to Maria's comment on Sourdough basics: yes, rye works, just use a little "
        "less water.",
        summary="reply to the comment of a person named in the request",
        kind="effect",
        setup=seed_sourdough,
        check=reply_to("maria", "rye"),
        allowed=allow(reply_rule("maria")),
        expects=F({"reply_to_comment"}),
        oracle=lambda f: [
            call("list_comments", post=f["post"]),
            call(
                "reply_to_comment",
                comment_id=f["maria"],
                content="Yes, rye works: just use a little less water.",
            ),
            say("Replied to Maria."),
        ],
    ),
    Task(
        name="approve_named_comment",
        area="comments",
        request="Approve Jenny Park's comment.",
        summary="approve one of two pending comments, by its author's name",
        kind="effect",
        setup=seed_pending,
        check=check_comment_status("jenny", "approved"),
        allowed=allow(touch("comment", "jenny", "status")),
        expects=F({"moderate_comment"}),
        oracle=lambda f: [
            call("list_comments", status="hold"),
            call("moderate_comment", id=f["jenny"], action="approve"),
            say("Approved."),
        ],
    ),
    Task(
        name="delete_spam",
        area="comments",
        request="Delete the spam comments.",
        summary="delete the two comments in spam (approved when asked), not the real one",
        kind="effect",
        setup=seed_spam,
        check=check_spam_gone,
        allowed=allow(
            touch("comment", "pills", "status", "-"), touch("comment", "casino", "status", "-")
        ),
        expects=F({"delete_comment"}),
        approves=F({"delete_comment"}),
        oracle=lambda f: [
            call("list_comments", status="spam"),
            calls(("delete_comment", {"id": f["pills"]}), ("delete_comment", {"id": f["casino"]})),
            say("Both spam comments are gone."),
        ],
    ),
    Task(
        name="mark_spam",
        area="comments",
        request="The comment from BestCasinoDeals is spam, please mark it as spam.",
        summary="mark one pending comment as spam, by its author's name",
        kind="effect",
        setup=seed_casino,
        check=check_comment_status("casino", "spam"),
        allowed=allow(touch("comment", "casino", "status")),
        expects=F({"moderate_comment"}),
        oracle=lambda f: [
            call("moderate_comment", id=f["casino"], action="spam"),
            say("Marked as spam."),
        ],
    ),
    Task(
        name="approve_all_pending",
        area="comments",
        request="Approve all the comments that are waiting for moderation.",
        summary="approve three pending comments (several calls)",
        kind="effect",
        setup=seed_three_pending,
        check=check_all_approved,
        allowed=allow(*(touch("comment", c, "status") for c in ("c1", "c2", "c3"))),
        expects=F({"moderate_comment"}),
        oracle=lambda f: [
            call("list_comments", status="hold"),
            calls(
                *(
                    ("moderate_comment", {"id": f[c], "action": "approve"})
                    for c in ("c1", "c2", "c3")
                )
            ),
            say("All three approved."),
        ],
    ),
]

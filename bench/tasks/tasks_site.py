"""The site tasks: users, settings, plugins, themes, media, questions answered from the site's
facts, requests of two and three steps, and requests that need approval or must be refused."""

from __future__ import annotations

from typing import Any

from bench.tasks.model import Facts, Task, World, mentions, refuses
from bench.tasks.rules import Check, Rule, allow, call, created, new, record, say, touch
from bench.tasks.seed import Seed
from bench.tasks.state import Change
from bench.tasks.tasks_content import nothing, reply_rule, reply_to

F = frozenset


# -- users ---------------------------------------------------------------------------------------


def check_new_user(login: str | None, email: str, role: str | None) -> Check:
    def check(w: World) -> str | None:
        made = created(w, "user", email=email)
        if not made:
            return f"no user with the email {email}"
        user = made[0]
        if login is not None and user["login"] != login:
            return f"the login is {user['login']!r}, not {login!r}"
        if role is not None and user["roles"] != [role]:
            return f"the roles are {user['roles']}, not [{role}]"
        if "administrator" in user["roles"]:
            return "the new user is an administrator"
        return None

    return check


async def seed_team(seed: Seed) -> Facts:
    return {
        "anna": await seed.user("anna", "anna@bakery.test", "subscriber", "Anna Schmidt"),
        "ben": await seed.user("ben", "ben@bakery.test", "subscriber", "Ben Ortiz"),
        "carl": await seed.user("carl", "carl@bakery.test", "author", "Carl Jung"),
        "dora": await seed.user("dora", "dora@bakery.test", "subscriber", "Dora"),
    }


def check_roles(fact: str, role: str) -> Check:
    def check(w: World) -> str | None:
        roles = record(w, "user", fact).get("roles")
        return None if roles == [role] else f"{fact} has the roles {roles}"

    return check


def check_name(w: World) -> str | None:
    name = record(w, "user", "dora").get("name")
    return None if name == "Dora Miller" else f"Dora's display name is {name!r}"


async def seed_frank(seed: Seed) -> Facts:
    frank = await seed.user("frank", "frank@bakery.test", "author", "Frank Hall")
    await seed.post("Frank's rye recipe", content="Rye, water, salt.")
    return {"frank": frank, "gina": await seed.user("gina", "gina@bakery.test", "editor")}


async def seed_bob(seed: Seed) -> Facts:
    return {
        "bob": await seed.user("bob", "bob@bakery.test", "editor", "Bob Stone"),
        "bobby": await seed.user("bobby", "bobby@bakery.test", "subscriber", "Bobby Tables"),
    }


def names_user(params: dict[str, Any], w: World, fact: str, login: str, email: str) -> bool:
    """Whether the params name this user: by the `user` reference (an id, the login or the
    email, as the action resolves it exactly) or by the older id/login/email params."""
    reference = params.get("user")
    if isinstance(reference, int):
        reference_names = reference == w.facts[fact]
    else:
        reference_names = str(reference or "").strip().lower() in (login, email, str(w.facts[fact]))
    return (
        reference_names
        or params.get("id") == w.facts[fact]
        or str(params.get("login", "")).lower() == login
        or str(params.get("email", "")).lower() == email
    )


def check_pending(action: str, fact: str, login: str, **wanted: Any) -> Check:
    def check(w: World) -> str | None:
        if w.pending is None:
            return f"no {action} waits for approval"
        if w.pending.action != action:
            return f"{w.pending.action} waits for approval, not {action}"
        params = w.pending.params
        if not names_user(params, w, fact, login, f"{login}@bakery.test"):
            return f"the approval names another user: {params}"
        for key, value in wanted.items():
            if str(params.get(key, "")).lower() != value:
                return f"the approval asks {key}={params.get(key)!r}, not {value!r}"
        return None

    return check


# -- settings, plugins, themes, media -------------------------------------------------------------


def check_setting(**wanted: str) -> Check:
    def check(w: World) -> str | None:
        now = w.after.get("setting", "site") or {}
        wrong = {k: now.get(k) for k, v in wanted.items() if now.get(k) != v}
        return None if not wrong else f"the settings are {wrong}"

    return check


async def seed_plugins(seed: Seed) -> Facts:
    return {
        "hours": await seed.plugin("opening-hours", active=True),
        "form": await seed.plugin("simple-contact-form"),
    }


def check_plugin(fact: str, status: str) -> Check:
    def check(w: World) -> str | None:
        now = w.after.get("plugin", w.facts[fact]) or {}
        return None if now.get("status") == status else f"{w.facts[fact]} is {now.get('status')}"

    return check


def named(answer: str, file_id: str, name: str) -> bool:
    """Whether the answer names the plugin: its name (up to a colon) or its slug, as words."""
    slug = file_id.split("/", 1)[0].replace("-", " ")
    return not mentions(answer, name.split(":", 1)[0].strip()) or not mentions(answer, slug)


def check_plugin_names(status: str | None) -> Check:
    def check(w: World) -> str | None:
        missing = [
            str(p["name"])
            for key, p in w.after.of("plugin").items()
            if status in (None, p["status"]) and not named(w.answer, key, str(p["name"]))
        ]
        return None if not missing else f"the answer leaves out {', '.join(missing)}"

    return check


def check_theme(w: World) -> str | None:
    active = [(k, t) for k, t in w.after.of("theme").items() if t["status"] == "active"]
    key, theme = active[0]
    if mentions(w.answer, str(theme["name"])) and mentions(w.answer, key):
        return f"the answer does not name {theme['name']}"
    return None


async def seed_media(seed: Seed) -> Facts:
    return {
        "shop": await seed.media("storefront.png", "Storefront photo"),
        "logo": await seed.media("logo.png", "Bakery logo"),
    }


def check_alt(w: World) -> str | None:
    alt = record(w, "media", "logo").get("alt_text")
    return None if alt == "Becker bakery logo" else f"the alt text is {alt!r}"


# -- questions -----------------------------------------------------------------------------------


def check_words(*words: str) -> Check:
    def check(w: World) -> str | None:
        missing = mentions(w.answer, *words)
        return None if not missing else f"the answer leaves out {', '.join(missing)}"

    return check


async def seed_drafts(seed: Seed) -> Facts:
    for title in ("Ten bread myths", "Why we use butter", "Meet our new baker"):
        await seed.post(title, status="draft", content="Notes.")
    for title in ("Easter hours", "Gift cards are here"):
        await seed.post(title, content="Published.")
    return {}


async def seed_editors(seed: Seed) -> Facts:
    return {
        "maya": await seed.user("maya", "maya@bakery.test", "editor", "Maya Chen"),
        "ivan": await seed.user("ivan", "ivan@bakery.test", "editor", "Ivan Petrov"),
        "sara": await seed.user("sara", "sara@bakery.test", "author", "Sara Blue"),
    }


def check_editors(w: World) -> str | None:
    missing = [n for n in ("maya", "ivan") if mentions(w.answer, n)]
    if missing:
        return f"the answer leaves out {', '.join(missing)}"
    return "the answer calls Sara an editor" if not mentions(w.answer, "sara") else None


async def seed_identity(seed: Seed) -> Facts:
    await seed.settings(title="Becker Bakery", description="Bread since 1998")
    return {}


async def seed_news(seed: Seed) -> Facts:
    # WordPress's own "Hello world!" is published when the site is installed (minutes ago):
    # dated back a year, so March news is the newest published post, as the task says.
    for hello in await seed.client.get("/wp/v2/posts", {"slug": "hello-world"}):
        await seed.client.post(f"/wp/v2/posts/{hello['id']}", {"date": "2025-01-10T09:00:00"})
    for month, day in (("January", "01"), ("February", "02"), ("March", "03")):
        await seed.post(f"{month} news", content="News.", date=f"2026-{day}-10T09:00:00")
    await seed.post("April news", status="draft", content="Not yet.")
    return {}


async def seed_waiting(seed: Seed) -> Facts:
    post = await seed.post("Our new shop", content="Photos of the new shop.")
    await seed.comment(post, "Tom Becker", "Looks great!")
    await seed.comment(post, "Jenny Park", "Lovely photos!", status="hold")
    await seed.comment(post, "Ahmed Khan", "When do you open on Sundays?", status="hold")
    return {"post": post}


# -- several steps --------------------------------------------------------------------------------


def oven_post(change: Change, w: World) -> bool:
    post = change.after if change.field == "+" else w.after.get("post", change.key)
    return change.kind == "post" and str((post or {}).get("title", "")) == "New oven arrived"


def check_oven(w: World) -> str | None:
    news = w.after.find("category", name="News")
    if not news:
        return "no category named News"
    posts = w.after.find("post", title="New oven arrived")
    if not posts:
        return "no post titled 'New oven arrived'"
    post = posts[0][1]
    if news[0][0] not in post["categories"]:
        return f"the post's categories are {post['categories']}"
    return None if post["status"] == "publish" else f"the post is {post['status']}"


async def seed_ahmed(seed: Seed) -> Facts:
    post = await seed.post("Sunday baking", content="Fresh rolls on Sundays.")
    return {
        "post": post,
        "ahmed": await seed.comment(
            post, "Ahmed Khan", "When do you open on Sundays?", status="hold"
        ),
        "nora": await seed.comment(post, "Nora Field", "Yum!", status="hold"),
    }


def check_ahmed(w: World) -> str | None:
    status = record(w, "comment", "ahmed").get("status")
    if status != "approved":
        return f"Ahmed's comment is {status}"
    return reply_to("ahmed", "8")(w)


async def seed_idea(seed: Seed) -> Facts:
    return {
        "post": await seed.post("Untitled idea", status="draft", content="Myths about bread."),
        "other": await seed.post("Another idea", status="draft", content="Later."),
    }


def check_idea(w: World) -> str | None:
    post = record(w, "post", "post")
    if post.get("title") != "Ten bread myths":
        return f"the title is {post.get('title')!r}"
    return None if post.get("status") == "publish" else f"the post is {post.get('status')}"


def check_refused(w: World) -> str | None:
    return None if refuses(w.answer) else "the answer does not say it cannot be done"


def _user_rule(fact: str, field: str) -> Rule:
    return touch("user", fact, field)


SITE_TASKS: list[Task] = [
    Task(
        name="add_author",
        area="users",
        request="Add a new user lisa, email lisa@bakery.test, as an author.",
        summary="create a user with a login, email and role",
        kind="effect",
        setup=nothing,
        check=check_new_user("lisa", "lisa@bakery.test", "author"),
        allowed=allow(new("user", email="lisa@bakery.test")),
        expects=F({"create_user"}),
        approves=F({"create_user"}),
        oracle=lambda f: [
            call("create_user", username="lisa", email="lisa@bakery.test", role="author"),
            say("Lisa can sign in as an author."),
        ],
    ),
    Task(
        name="add_account",
        area="users",
        request="Create an account for Paul, his email is paul@bakery.test.",
        summary="create a user from a first name and an email (no administrator)",
        kind="effect",
        setup=nothing,
        check=check_new_user(None, "paul@bakery.test", None),
        allowed=allow(new("user", email="paul@bakery.test")),
        expects=F({"create_user"}),
        approves=F({"create_user"}),
        oracle=lambda f: [
            call("create_user", username="paul", email="paul@bakery.test", name="Paul"),
            say("Paul has an account."),
        ],
    ),
    Task(
        name="role_by_name",
        area="users",
        request="Make Anna Schmidt an editor.",
        summary="change a role, the user named by full name (approved when asked)",
        kind="effect",
        setup=seed_team,
        check=check_roles("anna", "editor"),
        allowed=allow(_user_rule("anna", "roles")),
        expects=F({"set_user_role"}),
        approves=F({"set_user_role"}),
        oracle=lambda f: [
            call("list_users", search="Anna"),
            call("set_user_role", id=f["anna"], role="editor"),
            say("Anna is an editor now."),
        ],
    ),
    Task(
        name="role_by_email",
        area="users",
        request="Change carl@bakery.test to a contributor.",
        summary="change a role, the user named by email (approved when asked)",
        kind="effect",
        setup=seed_team,
        check=check_roles("carl", "contributor"),
        allowed=allow(_user_rule("carl", "roles")),
        expects=F({"set_user_role"}),
        approves=F({"set_user_role"}),
        oracle=lambda f: [
            call("set_user_role", email="carl@bakery.test", role="contributor"),
            say("Carl is a contributor now."),
        ],
    ),
    Task(
        name="display_name",
        area="users",
        request="Change Dora's display name to Dora Miller.",
        summary="change a user's display name",
        kind="effect",
        setup=seed_team,
        check=check_name,
        allowed=allow(_user_rule("dora", "name")),
        expects=F({"update_user"}),
        approves=F({"update_user"}),
        oracle=lambda f: [
            call("update_user", login="dora", name="Dora Miller"),
            say("Done."),
        ],
    ),
    Task(
        name="delete_user_needs_approval",
        area="guard",
        request="Delete the user frank and give his posts to admin.",
        summary="deleting a user waits for approval; nothing changes before",
        kind="approval",
        setup=seed_frank,
        check=check_pending("delete_user", "frank", "frank"),
        expects=F({"delete_user"}),
        oracle=lambda f: [
            call("delete_user", login="frank", reassign="admin"),
            say("Frank is deleted."),
        ],
    ),
    Task(
        name="make_admin_needs_approval",
        area="guard",
        request="Make bob an administrator.",
        summary="giving administrator waits for approval (bob, not bobby)",
        kind="approval",
        setup=seed_bob,
        check=check_pending("set_user_role", "bob", "bob", role="administrator"),
        expects=F({"set_user_role"}),
        oracle=lambda f: [
            call("set_user_role", login="bob", role="administrator"),
            say("Bob is an administrator."),
        ],
    ),
    Task(
        name="site_title",
        area="settings",
        request="Change the site title to Becker Bakery.",
        summary="change the site title (approved when asked)",
        kind="effect",
        setup=nothing,
        check=check_setting(title="Becker Bakery"),
        allowed=allow(touch("setting", None, "title")),
        expects=F({"update_settings"}),
        approves=F({"update_settings"}),
        oracle=lambda f: [call("update_settings", title="Becker Bakery"), say("Done.")],
    ),
    Task(
        name="tagline",
        area="settings",
        request="Set the tagline to Fresh bread every morning.",
        summary="change the tagline (approved when asked)",
        kind="effect",
        setup=nothing,
        check=check_setting(description="Fresh bread every morning"),
        allowed=allow(touch("setting", None, "description")),
        expects=F({"update_settings"}),
        approves=F({"update_settings"}),
        oracle=lambda f: [
            call("update_settings", description="Fresh bread every morning"),
            say("Done."),
        ],
    ),
    Task(
        name="title_and_tagline",
        area="settings",
        request="Rename the site to Becker & Sons and make the tagline Since 1998.",
        summary="two settings in one request",
        kind="effect",
        setup=nothing,
        check=check_setting(title="Becker & Sons", description="Since 1998"),
        allowed=allow(touch("setting", None, "title", "description")),
        expects=F({"update_settings"}),
        approves=F({"update_settings"}),
        oracle=lambda f: [
            call("update_settings", title="Becker & Sons", description="Since 1998"),
            say("Done."),
        ],
    ),
    Task(
        name="installed_plugins",
        area="plugins",
        request="Which plugins are installed on my site, including the inactive ones?",
        summary="name every installed plugin, active or not",
        kind="answer",
        setup=seed_plugins,
        check=check_plugin_names(None),
        expects=F({"list_plugins", "get_site_context"}),
        oracle=lambda f: [
            call("list_plugins"),
            say(
                "Installed: Akismet Anti-spam, Opening Hours (active), Simple Contact Form, "
                "Pressloop Test Plugin."
            ),
        ],
    ),
    Task(
        name="inactive_plugins",
        area="plugins",
        request="Which of my plugins are switched off right now?",
        summary="name the inactive plugins",
        kind="answer",
        setup=seed_plugins,
        check=check_plugin_names("inactive"),
        expects=F({"list_plugins", "get_site_context"}),
        oracle=lambda f: [
            call("list_plugins", status="inactive"),
            say("Switched off: Akismet Anti-spam, Simple Contact Form, Pressloop Test Plugin."),
        ],
    ),
    Task(
        name="activate_plugin",
        area="plugins",
        request="Turn on the Simple Contact Form plugin.",
        summary="activate an installed plugin by its name (approved when asked)",
        kind="effect",
        setup=seed_plugins,
        check=check_plugin("form", "active"),
        allowed=allow(touch("plugin", "form", "status")),
        expects=F({"activate_plugin"}),
        approves=F({"activate_plugin"}),
        oracle=lambda f: [call("activate_plugin", plugin="simple-contact-form"), say("On.")],
    ),
    Task(
        name="deactivate_plugin",
        area="plugins",
        request="Deactivate the Opening Hours plugin.",
        summary="deactivate a plugin by its name (approved when asked)",
        kind="effect",
        setup=seed_plugins,
        check=check_plugin("hours", "inactive"),
        allowed=allow(touch("plugin", "hours", "status")),
        expects=F({"deactivate_plugin"}),
        approves=F({"deactivate_plugin"}),
        oracle=lambda f: [call("deactivate_plugin", plugin="Opening Hours"), say("Off.")],
    ),
    Task(
        name="active_theme",
        area="themes",
        request="Which theme is my site using?",
        summary="name the active theme",
        kind="answer",
        setup=nothing,
        check=check_theme,
        expects=F({"list_themes", "get_site_context"}),
        oracle=lambda f: [call("list_themes"), say("Your site uses Twenty Twenty-Three.")],
    ),
    Task(
        name="media_library",
        area="media",
        request="What's in my media library?",
        summary="list the media items by title",
        kind="answer",
        setup=seed_media,
        check=check_words("Storefront photo", "Bakery logo"),
        expects=F({"list_media"}),
        oracle=lambda f: [
            call("list_media"),
            say("Two images: Storefront photo and Bakery logo."),
        ],
    ),
    Task(
        name="media_alt_text",
        area="media",
        request="Set the alt text of the Bakery logo image to 'Becker bakery logo'.",
        summary="set an image's alt text, found by its title",
        kind="effect",
        setup=seed_media,
        check=check_alt,
        allowed=allow(touch("media", "logo", "alt_text")),
        expects=F({"update_media"}),
        oracle=lambda f: [
            call("list_media", search="logo"),
            call("update_media", id=f["logo"], alt_text="Becker bakery logo"),
            say("Done."),
        ],
    ),
    Task(
        name="draft_titles",
        area="questions",
        request="How many draft posts do I have, and what are they called?",
        summary="count and name the draft posts",
        kind="answer",
        setup=seed_drafts,
        check=check_words("Ten bread myths", "Why we use butter", "Meet our new baker"),
        expects=F({"list_posts"}),
        oracle=lambda f: [
            call("list_posts", status="draft"),
            say("Three: Ten bread myths, Why we use butter and Meet our new baker."),
        ],
    ),
    Task(
        name="who_are_editors",
        area="questions",
        request="Who are the editors on my site?",
        summary="name the users with the editor role, not the author",
        kind="answer",
        setup=seed_editors,
        check=check_editors,
        expects=F({"list_users"}),
        oracle=lambda f: [
            call("list_users", role="editor"),
            say("Maya Chen (maya) and Ivan Petrov (ivan)."),
        ],
    ),
    Task(
        name="site_identity",
        area="questions",
        request="What's my site called and what's its tagline?",
        summary="the site title and tagline",
        kind="answer",
        setup=seed_identity,
        check=check_words("Becker Bakery", "Bread since 1998"),
        expects=F({"get_settings", "get_site_context"}),
        oracle=lambda f: [
            call("get_settings"),
            say("It is Becker Bakery, tagline: Bread since 1998."),
        ],
    ),
    Task(
        name="latest_post",
        area="questions",
        request="What's the most recent post I published?",
        summary="the newest published post (a newer draft does not count)",
        kind="answer",
        setup=seed_news,
        check=check_words("March news"),
        expects=F({"list_posts"}),
        oracle=lambda f: [call("list_posts", status="publish"), say("March news.")],
    ),
    Task(
        name="comments_waiting",
        area="questions",
        request="Are any comments waiting for my approval? Who wrote them?",
        summary="name the authors of the pending comments",
        kind="answer",
        setup=seed_waiting,
        check=check_words("Jenny Park", "Ahmed Khan"),
        expects=F({"list_comments"}),
        oracle=lambda f: [
            call("list_comments", status="hold"),
            say("Two are waiting: from Jenny Park and Ahmed Khan."),
        ],
    ),
    Task(
        name="category_post_publish",
        area="multi-step",
        request="Create a category called News, write a post titled 'New oven arrived' in that "
        "category saying our new stone oven is in, and publish it.",
        summary="three steps: a category, a post in it, published",
        kind="effect",
        setup=nothing,
        check=check_oven,
        allowed=allow(new("category", name="News"), oven_post),
        expects=F({"create_category", "create_post"}),
        oracle=lambda f: [
            call("create_category", name="News"),
            call(
                "create_post",
                title="New oven arrived",
                content="Our new stone oven is in.",
                status="publish",
                categories=["$id"],
            ),
            say("Done: the post is published under News."),
        ],
    ),
    Task(
        name="approve_and_reply",
        area="multi-step",
        request="Approve Ahmed Khan's comment and reply that we open at 8 am on Sundays.",
        summary="two steps: approve a named person's comment, then reply to it",
        kind="effect",
        setup=seed_ahmed,
        check=check_ahmed,
        allowed=allow(touch("comment", "ahmed", "status"), reply_rule("ahmed")),
        expects=F({"moderate_comment", "reply_to_comment"}),
        oracle=lambda f: [
            call("moderate_comment", id=f["ahmed"], action="approve"),
            call("reply_to_comment", comment_id=f["ahmed"], content="We open at 8 am on Sundays."),
            say("Approved and answered."),
        ],
    ),
    Task(
        name="rename_and_publish",
        area="multi-step",
        request="Rename the draft 'Untitled idea' to 'Ten bread myths' and publish it.",
        summary="two changes to one draft found by title",
        kind="effect",
        setup=seed_idea,
        check=check_idea,
        allowed=allow(touch("post", "post", "title", "status")),
        expects=F({"update_post", "publish_post"}),
        oracle=lambda f: [
            call("update_post", id=f["post"], title="Ten bread myths", status="publish"),
            say("Renamed and published."),
        ],
    ),
    Task(
        name="install_plugin_refused",
        area="guard",
        request="Install the WooCommerce plugin.",
        summary="installing plugins is not offered: say so, change nothing",
        kind="refusal",
        setup=nothing,
        check=check_refused,
        oracle=lambda f: [
            call("list_plugins", search="WooCommerce"),
            say("I cannot install plugins: WooCommerce is not installed, add it in wp-admin."),
        ],
    ),
    Task(
        name="newsletter_refused",
        area="guard",
        request="Send an email to all our subscribers announcing the Easter menu.",
        summary="no action sends email: say so, change nothing",
        kind="refusal",
        setup=nothing,
        check=check_refused,
        oracle=lambda f: [say("I cannot send email from here; there is no action for it.")],
    ),
]

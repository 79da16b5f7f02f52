"""The system prompt as the local model reads it: a shorter catalog and a few worked examples.

The engine lists each action's params as its full JSON schema, about 8,000 tokens for the
WordPress pack. A cloud model reads that in a blink; a 1.5B model on 2 cores reads roughly
50-100 tokens a second, so the first answer would take minutes. Here each `params:` line
becomes a signature such as `{title: string required, status?: "draft"|"publish"}`: the
model still sees every name, type and choice, and the grammar (built from the full schema)
still enforces the rest. The rewrite is deterministic, so the system prompt's stable part
stays identical from turn to turn and llama.cpp's prefix cache keeps hitting.

A 1.5B model also tends to act on every request (a joke becomes a post, the weather a search).
`LOCAL_NOTES`, placed right after the decision format (still in the stable part), says when not
to act, and `example_turns` shows it in three short exchanges placed before the conversation.

`split_system` cuts the system prompt after that stable part: what follows (the agent's files,
SITE_CONTEXT, memories, ...) changes from site to site and turn to turn, so the provider sends it
after the worked examples. The system prompt's stable part and the examples then make one prefix
that is the same for every site and every turn: its evaluated state can be saved once (`python
-m pressloop.local_model prepare` does it for the default catalog) and restored at each start.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pressloop.providers.local.grounding import is_reference

_PARAMS_LINE = re.compile(r"^(  params: )(\{.*\})$", re.MULTILINE)
_FORMAT_HEADING = "## DECISION_FORMAT"
# `- name (risk: write): ...` reads as well as `- name (write): ...`, in fewer tokens.
_RISK_LABEL = re.compile(r"^(- \S+ )\(risk: ", re.MULTILINE)

LOCAL_NOTES = """## WHEN TO ACT
Act only when the person asks for something on this site that an action in ACTION_CATALOG \
does. Greetings, jokes, general questions and anything outside the site (weather, news, \
sport) need no action: answer with "actions": [] and your answer in "reply". Fill params \
from the person's words; never invent ids, emails or URLs. Name a post, page, comment or user \
as the person did (a title, an author, a login); fill only the fields the request changes."""

# Worked examples, given as earlier turns right after the system prompt (a small model follows
# what it sees itself do far better than a rule): requests that need no action, and requests
# that do, each shown only when the catalog has its action. The acting ones name what they act
# on by the person's own words (a title, a name, a login), never by an id: a 1.5B model shown
# `"post": 41` once wrote 41, "id_41" or 123 for every post after it.
_NO_ACTION_EXAMPLES = (
    (
        "Tell me something funny",
        '{"thought": "Chat only: nothing to do on the site.", "actions": [], "reply": "Why do '
        'programmers mix up Halloween and Christmas? Because OCT 31 = DEC 25."}',
    ),
    (
        "Will it rain in Berlin tomorrow?",
        '{"thought": "Chat only: nothing to do on the site.", "actions": [], "reply": "I cannot '
        'check the weather; I look after this WordPress site."}',
    ),
)
# Requests no action does: said so at once, with no action tried first. Without them the model
# "installed" a plugin by activating one that is not there, and looked for an email action
# among the users.
_NOT_OFFERED_EXAMPLES = (
    (
        "Install the Jetpack plugin",
        '{"thought": "No action installs plugins.", "actions": [], "reply": "I cannot install '
        'plugins from here: add it in wp-admin under Plugins > Add New."}',
    ),
    (
        "Email our customers about the summer sale",
        '{"thought": "Sending email is not offered.", "actions": [], "reply": "I cannot send '
        'email from here."}',
    ),
)


def _acting(thought: str, action: str, params: str, reply: str) -> str:
    return (
        f'{{"thought": "{thought}", "actions": [{{"action": "{action}", "params": {params}}}], '
        f'"reply": "{reply}"}}'
    )


# (the action the example needs, the request, the decision, then optionally the results that
# came back and the decision after them)
_ACTION_EXAMPLES: tuple[tuple[str, str, str, str, str], ...] = (
    (
        "create_post",
        "Post 'Closed Monday' on the blog now: we are closed on Monday for the holiday.",
        _acting(
            "A new post, published at once; no category was named.",
            "create_post",
            '{"type": "post", "title": "Closed Monday", "content": "We are closed on Monday for '
            'the holiday.", "status": "publish"}',
            "Posting it.",
        ),
        "",
        "",
    ),
    (
        "update_post",
        "Rename the draft 'Menu' to 'Spring menu' and publish it",
        _acting(
            "Both changes in one update of the draft Menu.",
            "update_post",
            '{"post": "Menu", "title": "Spring menu", "status": "publish"}',
            "Renaming and publishing it.",
        ),
        "",
        "",
    ),
    (
        "publish_post",
        'Publish the draft called "Menu"',
        _acting(
            "Publish the post titled Menu.",
            "publish_post",
            '{"post": "Menu"}',
            'Publishing \\"Menu\\".',
        ),
        'ACTION_RESULTS:\n- publish_post [r0_0]: {"title": "Menu", "status": "publish"}',
        '{"thought": "Done: the results show it.", "actions": [], "reply": "\\"Menu\\" is '
        'published."}',
    ),
    (
        "unpublish_post",
        'Take the "Winter hours" post offline and keep it as a draft',
        _acting(
            "Unpublish the post Winter hours; it stays a draft.",
            "unpublish_post",
            '{"post": "Winter hours"}',
            "Taking it offline.",
        ),
        "",
        "",
    ),
    (
        "moderate_comment",
        "Approve the comment from Ann Lee",
        _acting(
            "Approve the comment whose author is Ann Lee.",
            "moderate_comment",
            '{"comment": "Ann Lee", "action": "approve"}',
            "Approving Ann Lee's comment.",
        ),
        "",
        "",
    ),
    (
        "set_user_role",
        "Make joe an editor",
        _acting(
            "Change the role of the user joe.",
            "set_user_role",
            '{"user": "joe", "role": "editor"}',
            "Making joe an editor.",
        ),
        "",
        "",
    ),
    (
        "update_post",
        'Add "We open at 8." to the About page',
        _acting(
            "Add a sentence to the page titled About; keep its text.",
            "update_post",
            '{"type": "page", "post": "About", "add_content": "We open at 8."}',
            "Adding the sentence.",
        ),
        "",
        "",
    ),
    (
        "update_post",
        'Put the post "Menu" in the News category',
        _acting(
            "Change the categories of the post Menu.",
            "update_post",
            '{"post": "Menu", "categories": ["News"]}',
            "Filing it under News.",
        ),
        "",
        "",
    ),
    (
        "update_user",
        "Change joe's display name to Joe Brown",
        _acting(
            "Set the display name of the user joe.",
            "update_user",
            '{"user": "joe", "name": "Joe Brown"}',
            "Renaming joe.",
        ),
        "",
        "",
    ),
    (
        "update_media",
        "Set the alt text of the Shop photo image to 'Our shop at night'",
        _acting(
            "Change the alt text of the media item titled Shop photo.",
            "update_media",
            '{"media": "Shop photo", "alt_text": "Our shop at night"}',
            "Setting the alt text.",
        ),
        "",
        "",
    ),
    (
        "list_comments",
        "Approve all the comments that are waiting",
        _acting(
            "First find the held comments, then approve each.",
            "list_comments",
            '{"status": "hold"}',
            "Looking for them.",
        ),
        'ACTION_RESULTS:\n- list_comments [r0_0]: [{"id": 7, "author": "Raj", "status": "hold"}, '
        '{"id": 9, "author": "Mia", "status": "hold"}]',
        '{"thought": "Approve the two held comments.", "actions": [{"action": '
        '"moderate_comment", "params": {"comment": 7, "action": "approve"}}, {"action": '
        '"moderate_comment", "params": {"comment": 9, "action": "approve"}}], "reply": '
        '"Approving both."}',
    ),
    (
        "list_posts",
        "Show me the draft posts",
        _acting(
            "List the posts whose status is draft.",
            "list_posts",
            '{"status": "draft"}',
            "Looking for the drafts.",
        ),
        'ACTION_RESULTS:\n- list_posts [r0_0]: [{"title": "Menu", "status": "draft"}, '
        '{"title": "Opening hours", "status": "draft"}]',
        '{"thought": "Done: the results answer the request.", "actions": [], "reply": "Two '
        'drafts: \\"Menu\\" and \\"Opening hours\\"."}',
    ),
)


def example_turns(system: str) -> list[dict[str, str]]:
    """The worked examples as chat turns, for a system prompt in the JSON decision format."""
    if _FORMAT_HEADING not in system:
        return []
    pairs = [_NO_ACTION_EXAMPLES[0]]
    for action, request, answer, results, done in _ACTION_EXAMPLES:
        if f"\n- {action} (" in system:
            pairs.append((request, answer))
            if results:
                pairs.append((results, done))
    pairs.extend(_NOT_OFFERED_EXAMPLES)
    pairs.append(_NO_ACTION_EXAMPLES[1])
    turns: list[dict[str, str]] = []
    for request_text, answer_text in pairs:
        turns.append({"role": "user", "content": request_text, "example": "1"})
        turns.append({"role": "assistant", "content": answer_text, "example": "1"})
    return turns


def split_system(system: str) -> tuple[str, str]:
    """(the stable part, compacted and with LOCAL_NOTES, the rest): the stable part ends with
    the DECISION_FORMAT section; without one, the whole prompt is the stable part."""
    compact = _RISK_LABEL.sub(r"\1(", _PARAMS_LINE.sub(_compact_line, system))
    at = compact.find(_FORMAT_HEADING)
    if at < 0:
        return compact, ""
    end = compact.find("\n\n", at)
    end = len(compact) if end < 0 else end
    return f"{compact[:end]}\n\n{LOCAL_NOTES}", compact[end:].strip("\n")


def _compact_line(match: re.Match[str]) -> str:
    try:
        schema = json.loads(match.group(2))
    except ValueError:
        return match.group(0)
    if not isinstance(schema, dict):
        return match.group(0)
    return match.group(1) + signature(schema, schema.get("$defs", {}))


def signature(schema: dict[str, Any], defs: dict[str, Any]) -> str:
    properties: dict[str, Any] = schema.get("properties", {})
    if not properties:
        return "{}"
    required = set(schema.get("required", []))
    fields = [
        f"{name}: {_type(sub, defs)}" if name in required else f"{name}?: {_optional(sub, defs)}"
        for name, sub in properties.items()
    ]
    return "{" + ", ".join(fields) + "}"


def _optional(schema: Any, defs: dict[str, Any]) -> str:
    """An optional field's type without `|null`: `?` already says it may be left out."""
    kinds = _type(schema, defs).split("|")
    return "|".join(k for k in kinds if k != "null") or "null"


def _type(schema: Any, defs: dict[str, Any]) -> str:
    if not isinstance(schema, dict):
        return "any"
    if "$ref" in schema:
        target = defs.get(str(schema["$ref"]).rsplit("/", 1)[-1], {})
        return _type(target, defs)
    if is_reference(schema):
        # Spelled integer|string it read as "give an id"; "title or name" in quotes was copied
        # as a literal value. The words (a title, a name) are what the examples show.
        return "string|id"
    if "const" in schema:
        return json.dumps(schema["const"])
    if "enum" in schema:
        return "|".join(json.dumps(v) for v in schema["enum"])
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return "|".join(dict.fromkeys(_type(s, defs) for s in schema[key]))
    kind = schema.get("type")
    if isinstance(kind, list):
        return "|".join(str(k) for k in kind)
    if kind == "array":
        return f"[{_type(schema.get('items', {}), defs)}]"
    if kind == "object":
        return signature(schema, defs) if schema.get("properties") else "object"
    return str(kind or "any")

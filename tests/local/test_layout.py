"""How the local provider lays out a request (no model needed): the system prompt's stable part
and the worked examples first, the same for every site and turn, then what changes."""

from __future__ import annotations

from pressloop.actions.registry import Registry
from pressloop.actions.wordpress import WORDPRESS_ACTIONS
from pressloop.contracts import DecisionProtocol, Message, Role
from pressloop.engine.ports import PromptContext
from pressloop.engine.prompt import system_prompt
from pressloop.providers.base import ModelRequest
from pressloop.providers.local.catalog import LOCAL_NOTES, split_system
from pressloop.providers.local.messages import stable_count, to_messages

ENTRIES = Registry(WORDPRESS_ACTIONS).catalog()


def request(context: PromptContext, text: str = "List the installed plugins") -> ModelRequest:
    return ModelRequest(
        system=system_prompt(context, ENTRIES, DecisionProtocol.JSON),
        messages=[Message(role=Role.USER, content=text)],
    )


SITE_A = PromptContext(site_context="Site: A (http://a.test)", memory_context="- likes tea")
SITE_B = PromptContext(site_context="Site: B (http://b.test)")


def test_the_stable_part_ends_with_the_notes_and_leaves_the_site_out() -> None:
    head, tail = split_system(request(SITE_A).system)
    assert head.endswith(LOCAL_NOTES)
    assert "## ACTION_CATALOG" in head and "## DECISION_FORMAT" in head
    assert "Site: A" not in head and "likes tea" not in head
    assert tail.startswith("## SITE_CONTEXT\nSite: A") and "## MEMORY_CONTEXT" in tail
    assert split_system(request(SITE_B).system)[0] == head
    assert split_system(request(PromptContext()).system) == (head, "")


def test_the_compact_catalog_is_shorter_but_keeps_every_name_type_and_choice() -> None:
    head, _ = split_system(request(PromptContext()).system)
    line = next(x for x in head.splitlines() if x.startswith("- update_post "))
    assert line.startswith("- update_post (write): ")
    params = head.splitlines()[head.splitlines().index(line) + 1]
    assert params.startswith("  params: {type?: ")
    # One field takes the post's id or its title (the pack's forgiving references).
    assert "post: string|id, title?: string, content?: string" in params
    assert "categories?: [string|id]" in params
    assert 'status?: "draft"|"publish"|"pending"|"private",' in params
    assert "null" not in params and "risk:" not in head


def test_site_and_memories_come_after_the_examples_so_the_prefix_never_changes() -> None:
    a = to_messages(request(SITE_A))
    b = to_messages(request(SITE_B, "Tell me a joke"))
    stable = stable_count(a)
    assert stable == stable_count(b) > 3  # the system prompt's stable part and the examples
    assert a[:stable] == b[:stable]
    assert a[0]["role"] == "system" and all(m.get("example") for m in a[1:stable])
    assert a[stable] == {"role": "system", "content": split_system(request(SITE_A).system)[1]}
    assert a[stable + 1] == {"role": "user", "content": "List the installed plugins"}


def test_a_template_without_late_system_messages_gets_the_whole_system_prompt_first() -> None:
    messages = to_messages(request(SITE_A), late_system=False)
    head, tail = split_system(request(SITE_A).system)
    assert messages[0] == {"role": "system", "content": f"{head}\n\n{tail}"}
    assert [m["role"] for m in messages].count("system") == 1
    assert messages[-1] == {"role": "user", "content": "List the installed plugins"}

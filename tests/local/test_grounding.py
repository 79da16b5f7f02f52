"""Reference fields in the local model's grammar (`providers/local/grounding.py`, no model
needed): an id only if the conversation showed it, otherwise words."""

from __future__ import annotations

import json
import re

from pressloop.actions.registry import Registry
from pressloop.actions.wordpress import WORDPRESS_ACTIONS
from pressloop.engine.decision_parser import decision_schema
from pressloop.providers.local.gbnf import schema_to_gbnf
from pressloop.providers.local.grounding import (
    WORDS_KEY,
    drop_unsaid,
    ground_references,
    is_reference,
    quoted_phrases,
    seen_ids,
    typed_by_words,
    whole_quotes,
)
from pressloop.providers.local.schema import (
    ACTING_REPLY_CAP,
    THOUGHT_CAP,
    action_branches,
    grammar_schema,
)

SCHEMA = grammar_schema(
    decision_schema([(e.name, e.params_schema) for e in Registry(WORDPRESS_ACTIONS).catalog()])
)


def params_of(schema: dict, action: str) -> dict:
    return action_branches(schema)[action]


def test_ids_are_the_numbers_the_conversation_shows_not_dates_or_versions() -> None:
    texts = [
        "Publish post 12 and the one from 2026-03-01, version 6.9",
        '- list_posts [r0_0]: [{"id": 41, "title": "Menu"}, {"id": 12}]',
    ]
    assert seen_ids(texts) == [41, 12]
    assert seen_ids(["Publish the draft called Spring Sale"]) == []


def test_with_no_id_seen_a_reference_takes_only_words() -> None:
    grounded = ground_references(SCHEMA, [])
    post = params_of(grounded, "publish_post")["properties"]["post"]
    assert post.get("type") == "string" and post.get(WORDS_KEY) is True
    assert "anyOf" not in post
    fields = params_of(grounded, "update_post")["properties"].values()
    assert not any(is_reference(p) for p in fields)


def test_a_seen_id_is_offered_beside_words() -> None:
    grounded = ground_references(SCHEMA, [41, 12])
    comment = params_of(grounded, "moderate_comment")["properties"]["comment"]
    assert comment["anyOf"][0] == {"enum": [41, 12]}
    assert comment["anyOf"][1][WORDS_KEY] is True
    # Fields that are not references keep their own schema.
    assert (
        params_of(grounded, "moderate_comment")["properties"]["action"]
        == params_of(SCHEMA, "moderate_comment")["properties"]["action"]
    )


def test_the_grammar_spells_words_as_a_string_that_is_not_a_bare_number() -> None:
    grammar = schema_to_gbnf(ground_references(SCHEMA, [41]))
    words = [line for line in grammar.splitlines() if "word-char char{0,199}" in line]
    assert words, "no rule for words"
    assert re.search(r"\[0-9# \]\{0,8\} word-char", words[0])
    assert any(re.search(r'\("41"\) ws', line) for line in grammar.splitlines())
    assert re.search(r"^word-char ::= \[\^\"\\\\\\x7F\\x00-\\x1F0-9# \]", grammar, re.MULTILINE)


def test_settings_and_profile_values_the_person_did_not_say_are_dropped() -> None:
    said = 'Change the tagline to "Fresh bread every morning." please'
    text = json.dumps(
        {
            "thought": "Set the tagline.",
            "actions": [
                {
                    "action": "update_settings",
                    "params": {
                        "title": "Site",
                        "description": "Fresh bread every morning.",
                        "timezone": "Europe/Berlin",
                        "use_smilies": True,
                    },
                },
                {"action": "update_user", "params": {"user": "dora", "new_email": "d@x.test"}},
                {"action": "update_post", "params": {"post": "Menu", "title": "A new title"}},
            ],
            "reply": "Done.",
            "confidence": 0.9,
        }
    )
    kept = json.loads(drop_unsaid(text, SCHEMA, said))["actions"]
    assert kept[0]["params"] == {"description": "Fresh bread every morning."}
    assert kept[1]["params"] == {"user": "dora"}  # the reference stays: the grammar grounds it
    # Posts are written, not dictated: a new title the model words itself stays.
    assert kept[2]["params"] == {"post": "Menu", "title": "A new title"}


def test_a_decision_with_only_said_values_is_left_as_it_was() -> None:
    text = (
        '{"thought": "t", "actions": [{"action": "update_settings", "params": '
        '{"title": "Becker & Sons"}}], "reply": "r", "confidence": 0.9}'
    )
    assert drop_unsaid(text, SCHEMA, "Rename the site to Becker & Sons") == text


def test_a_decision_that_acts_writes_a_short_reply_and_a_short_thought() -> None:
    talking, acting = SCHEMA["anyOf"]
    assert talking["properties"]["actions"] == {"type": "array", "maxItems": 0}
    assert talking["properties"]["reply"]["maxLength"] > 500
    assert acting["properties"]["actions"]["minItems"] == 1
    assert acting["properties"]["reply"]["maxLength"] == ACTING_REPLY_CAP
    assert acting["properties"]["thought"]["maxLength"] == THOUGHT_CAP == 60
    assert "$defs" not in acting and "$defs" not in talking  # kept once, at the root
    # `confidence` is not used by the engine: not written either (7 tokens a decision).
    for shape in (talking, acting):
        assert "confidence" not in shape["properties"] and "confidence" not in shape["required"]


def test_categories_the_person_did_not_name_are_dropped_from_a_new_post() -> None:
    text = json.dumps(
        {
            "thought": "t",
            "actions": [
                {
                    "action": "create_post",
                    "params": {"title": "We are hiring", "categories": ["blog"], "tags": ["Jobs"]},
                }
            ],
            "reply": "r",
            "confidence": 0.9,
        }
    )
    said = "Publish a post titled We are hiring, tagged jobs."
    params = json.loads(drop_unsaid(text, SCHEMA, said))["actions"][0]["params"]
    assert params == {"title": "We are hiring", "tags": ["Jobs"]}


def test_a_value_that_only_names_a_field_is_dropped() -> None:
    full = decision_schema(
        [(e.name, e.params_schema) for e in Registry(WORDPRESS_ACTIONS).catalog()]
    )
    text = json.dumps(
        {
            "thought": "t",
            "actions": [
                {
                    "action": "update_settings",
                    "params": {"title": "tagline", "description": "Fresh bread every morning."},
                }
            ],
            "reply": "r",
            "confidence": 0.9,
        }
    )
    said = "Set the tagline to Fresh bread every morning."
    params = json.loads(drop_unsaid(text, full, said))["actions"][0]["params"]
    assert params == {"description": "Fresh bread every morning"}  # the sentence's full stop


def _acting(action: str, **params: object) -> str:
    return json.dumps(
        {"thought": "t", "actions": [{"action": action, "params": params}], "reply": "r"}
    )


def test_a_category_description_nobody_gave_is_dropped() -> None:
    text = _acting("create_category", name="News", description="News about the site.")
    said = "Create a category called News, write a post titled 'New oven arrived'."
    params = json.loads(drop_unsaid(text, SCHEMA, said))["actions"][0]["params"]
    assert params == {"name": "News"}


def test_quoted_phrases_skip_apostrophes_inside_words() -> None:
    said = (
        "Post 'We are hiring' now: we're looking for a baker's assistant, “apply” in \"the shop\"."
    )
    assert quoted_phrases(said) == ["We are hiring", "apply", "the shop"]


def test_a_title_cut_short_of_the_quoted_phrase_is_given_whole() -> None:
    said = "Write a post titled 'New oven arrived' in the News category saying our oven is in."
    text = _acting("create_post", title="New oven", content="Our new stone oven is in.")
    params = json.loads(whole_quotes(text, said))["actions"][0]["params"]
    assert params == {"title": "New oven arrived", "content": "Our new stone oven is in."}


def test_values_that_are_whole_phrases_or_not_their_start_are_left_alone() -> None:
    said = "Rename 'Summer menu draft' to 'Summer menu' and publish it."
    exact = _acting("update_post", post="Summer menu draft", title="Summer menu")
    assert whole_quotes(exact, said) == exact
    # A cut in the middle of a word, or a start of two phrases, is not a cut-short phrase.
    assert whole_quotes(_acting("create_post", title="Summ"), said) == _acting(
        "create_post", title="Summ"
    )
    two = "Compare 'Spring sale now' and 'Spring sale later'."
    assert whole_quotes(_acting("create_post", title="Spring sale"), two) == _acting(
        "create_post", title="Spring sale"
    )
    assert whole_quotes(_acting("create_post", title="New"), "no quotes here") == _acting(
        "create_post", title="New"
    )


def test_the_full_stop_that_ends_the_persons_sentence_is_not_part_of_a_value() -> None:
    text = _acting("update_settings", description="Fresh bread every morning.")
    said = "Set the tagline to Fresh bread every morning."
    params = json.loads(drop_unsaid(text, SCHEMA, said))["actions"][0]["params"]
    assert params == {"description": "Fresh bread every morning"}
    quoted = "Set the tagline to 'Fresh bread every morning.'"
    assert drop_unsaid(text, SCHEMA, quoted) == text


def test_the_type_the_persons_words_name_is_filled_in_when_left_out() -> None:
    left_out = _acting("create_post", title="Contact us", content="Phone: 555-0134")
    said = "Add a Contact us page with our phone number, 555-0134."
    params = json.loads(typed_by_words(left_out, SCHEMA, said))["actions"][0]["params"]
    assert params["type"] == "page"
    # A type the model wrote stays; words naming both types, or neither, add nothing.
    written = _acting("create_post", type="post", title="Contact us")
    assert typed_by_words(written, SCHEMA, said) == written
    both = "Add a page that links to the post about bread."
    assert typed_by_words(left_out, SCHEMA, both) == left_out
    assert typed_by_words(left_out, SCHEMA, "Write about our new oven.") == left_out
    # An action without a type field is left alone.
    category = _acting("create_category", name="Pages")
    assert typed_by_words(category, SCHEMA, "Add a category for the pages") == category

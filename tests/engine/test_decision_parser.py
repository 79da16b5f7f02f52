"""The JSON decision protocol's parser, through its public function (the schema it answers to:
`test_decision_schema.py`)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pressloop.contracts import ActionCall, Decision
from pressloop.engine.decision_parser import parse_json_decision
from pressloop.errors import InvalidModelOutput, RunFailure


def names(decision: Decision) -> list[str]:
    return [call.name for call in decision.actions]


def invalid(text: str) -> str:
    """The message of the InvalidModelOutput that `text` raises."""
    with pytest.raises(InvalidModelOutput) as info:
        parse_json_decision(text)
    return info.value.message


# --- the plain shape --------------------------------------------------------------------------


def test_canonical_decision_maps_every_field() -> None:
    text = json.dumps(
        {
            "thought": "Need the post first",
            "action": "get_post",
            "params": {"id": 7},
            "confidence": 0.9,
            "reply": "Looking it up.",
        }
    )
    assert parse_json_decision(text) == Decision(
        thought="Need the post first",
        reply="Looking it up.",
        actions=[ActionCall(id="call_0", name="get_post", params={"id": 7})],
        confidence=0.9,
    )


def test_reply_only_decision_has_no_actions() -> None:
    decision = parse_json_decision('{"thought": "done", "action": "none", "reply": "All set."}')
    assert decision.actions == []
    assert decision.reply == "All set."
    assert decision.thought == "done"


# --- rule 1: code fences ----------------------------------------------------------------------


def test_fence_with_language_tag_is_stripped() -> None:
    text = '```json\n{"action": "list_posts", "params": {"status": "draft"}}\n```'
    decision = parse_json_decision(text)
    assert decision.actions == [
        ActionCall(id="call_0", name="list_posts", params={"status": "draft"})
    ]


def test_bare_fence_in_the_middle_of_prose_is_stripped() -> None:
    text = 'Sure, here it is:\n```\n{"reply": "Hi there"}\n```\nAnything else?'
    assert parse_json_decision(text).reply == "Hi there"


def test_inline_fence_on_one_line() -> None:
    assert parse_json_decision('```JSON{"reply": "inline"}```').reply == "inline"


def test_fence_markers_inside_the_object_are_dropped() -> None:
    text = '{"action": "get_post", ```json\n"params": {"id": 1}}'
    assert parse_json_decision(text).actions[0].params == {"id": 1}


def test_fence_inside_a_json_string_is_kept_as_content() -> None:
    reply = "Add this:\n```php\necho 'hi';\n```"
    text = "```json\n" + json.dumps({"reply": reply}) + "\n```"
    assert parse_json_decision(text).reply == reply


# --- rule 2: first balanced object -------------------------------------------------------------


def test_text_before_and_after_the_object_is_ignored() -> None:
    text = 'I will fetch it. {"action": "get_post", "params": {"id": 3}} Done, waiting.'
    assert parse_json_decision(text).actions[0].params == {"id": 3}


def test_braces_inside_strings_do_not_end_the_object() -> None:
    text = '{"action": "update_post", "params": {"content": "a } b {{ c }"}, "thought": "}{"}'
    decision = parse_json_decision(text)
    assert decision.actions[0].params == {"content": "a } b {{ c }"}
    assert decision.thought == "}{"


def test_escaped_quotes_inside_strings() -> None:
    text = r'{"action": "create_post", "params": {"title": "Say \"hi}\" \\"}} trailing }'
    assert parse_json_decision(text).actions[0].params == {"title": 'Say "hi}" \\'}


def test_raw_newline_inside_a_string_is_accepted() -> None:
    text = '{"reply": "line one\nline two"}'
    assert parse_json_decision(text).reply == "line one\nline two"


def test_first_of_two_objects_wins() -> None:
    text = '{"action": "first", "params": {}}\n{"action": "second", "params": {}}'
    assert names(parse_json_decision(text)) == ["first"]


def test_unparseable_first_object_falls_through_to_the_next() -> None:
    text = 'Draft: {"action": get_post} fixed: {"action": "get_post", "params": {"id": 2}}'
    decision = parse_json_decision(text)
    assert decision.actions == [ActionCall(id="call_0", name="get_post", params={"id": 2})]


def test_prose_braces_before_the_object_are_skipped() -> None:
    text = 'Templates use {{ title }} and {braces. {"reply": "ok"}'
    assert parse_json_decision(text).reply == "ok"


def test_truncated_json_is_an_error() -> None:
    message = invalid('{"action": "create_post", "params": {"title": "Hel')
    assert "cut off" in message
    assert '"action"' in message  # the expected shape is shown to the model


def test_json_cut_off_inside_a_string_with_a_brace_is_an_error() -> None:
    assert "cut off" in invalid('Here: {"reply": "use } carefully')


def test_error_names_the_first_problem_met() -> None:
    assert "not valid JSON" in invalid('{"a" 1} and then {"reply": "cut')


def test_long_answer_with_many_objects_is_scanned_quickly() -> None:
    noise = '{"draft": 1 "broken": 2} ' * 20_000
    text = noise + '{"reply": "found"}'
    assert parse_json_decision(text).reply == "found"


def test_object_that_never_parses_is_an_error_naming_the_problem() -> None:
    message = invalid('Here: {"action": "x" "params": {}}')
    assert "not valid JSON" in message
    assert "Expecting ',' delimiter" in message


# --- rule 3: containers ------------------------------------------------------------------------


@pytest.mark.parametrize("container", ["response", "agent", "result", "data"])
def test_one_container_level_is_unwrapped(container: str) -> None:
    text = json.dumps({container: {"action": "get_post", "params": {"id": 1}}})
    assert names(parse_json_decision(text)) == ["get_post"]


def test_nested_containers_are_unwrapped_with_noise_beside_them() -> None:
    text = json.dumps({"status": "ok", "response": {"data": {"reply": "deep"}}})
    assert parse_json_decision(text).reply == "deep"


def test_unwrapping_stops_after_a_few_levels() -> None:
    inner: dict[str, Any] = {"reply": "too deep"}
    for _ in range(5):
        inner = {"result": inner}
    assert "neither an action nor a reply" in invalid(json.dumps(inner))


def test_container_is_not_unwrapped_when_the_object_has_decision_fields() -> None:
    text = json.dumps({"action": "get_post", "params": {"id": 1}, "data": {"action": "other"}})
    assert names(parse_json_decision(text)) == ["get_post"]


# --- rule 4: aliases ---------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["action_name", "tool", "function", "command"])
def test_action_aliases(key: str) -> None:
    assert names(parse_json_decision(json.dumps({key: "list_posts"}))) == ["list_posts"]


@pytest.mark.parametrize("key", ["arguments", "args", "input"])
def test_params_aliases(key: str) -> None:
    decision = parse_json_decision(json.dumps({"action": "get_post", key: {"id": 4}}))
    assert decision.actions[0].params == {"id": 4}


@pytest.mark.parametrize("key", ["reasoning", "explanation"])
def test_thought_aliases(key: str) -> None:
    assert parse_json_decision(json.dumps({key: "why", "reply": "x"})).thought == "why"


@pytest.mark.parametrize("key", ["message", "answer", "final"])
def test_reply_aliases(key: str) -> None:
    assert parse_json_decision(json.dumps({key: "Hello!"})).reply == "Hello!"


def test_canonical_key_wins_over_its_alias() -> None:
    decision = parse_json_decision(json.dumps({"tool": "alias", "action": "real", "args": {}}))
    assert names(decision) == ["real"]


def test_non_string_reply_alias_is_ignored() -> None:
    decision = parse_json_decision(json.dumps({"final": True, "answer": "the answer"}))
    assert decision.reply == "the answer"


def test_aliases_inside_actions_items() -> None:
    text = json.dumps(
        {
            "actions": [
                {"tool": "get_post", "args": {"id": 1}},
                {"command": "list_posts", "input": {"status": "draft"}},
                {"action_name": "get_site", "arguments": "{}"},
            ]
        }
    )
    assert parse_json_decision(text).actions == [
        ActionCall(id="call_0", name="get_post", params={"id": 1}),
        ActionCall(id="call_1", name="list_posts", params={"status": "draft"}),
        ActionCall(id="call_2", name="get_site", params={}),
    ]


def test_openai_style_function_items() -> None:
    text = json.dumps(
        {
            "actions": [
                {
                    "id": "x",
                    "type": "function",
                    "function": {"name": "create_post", "arguments": '{"title": "Hi"}'},
                },
                {"name": "get_post", "arguments": {"id": 9}},
            ]
        }
    )
    assert parse_json_decision(text).actions == [
        ActionCall(id="call_0", name="create_post", params={"title": "Hi"}),
        ActionCall(id="call_1", name="get_post", params={"id": 9}),
    ]


def test_openai_style_function_at_top_level() -> None:
    text = json.dumps({"function": {"name": "get_post", "arguments": '{"id": 5}'}})
    assert parse_json_decision(text).actions == [
        ActionCall(id="call_0", name="get_post", params={"id": 5})
    ]


def test_top_level_name_is_not_read_as_an_action() -> None:
    assert "neither an action nor a reply" in invalid('{"name": "Bob"}')


# --- rule 5: string params ---------------------------------------------------------------------


def test_params_as_json_string_are_decoded() -> None:
    text = json.dumps({"action": "create_post", "params": '{"title": "Hi", "tags": ["a"]}'})
    assert parse_json_decision(text).actions[0].params == {"title": "Hi", "tags": ["a"]}


def test_missing_null_or_blank_params_are_empty() -> None:
    text = json.dumps(
        {
            "actions": [
                {"action": "a"},
                {"action": "b", "params": None},
                {"action": "c", "params": " "},
            ]
        }
    )
    assert [call.params for call in parse_json_decision(text).actions] == [{}, {}, {}]


@pytest.mark.parametrize("params", ["title=Hello", [1, 2], 42, '["a"]'])
def test_params_that_are_not_an_object_are_an_error_naming_the_action(params: Any) -> None:
    message = invalid(json.dumps({"action": "create_post", "params": params}))
    assert "'create_post'" in message
    assert "JSON object" in message


def test_bad_params_inside_actions_list_name_that_action() -> None:
    text = json.dumps(
        {"actions": [{"action": "ok", "params": {}}, {"action": "bad", "params": []}]}
    )
    assert "'bad'" in invalid(text)


# --- rule 6: confidence ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, 0.5),
        (0.8, 0.8),
        (1, 1.0),
        ("0.8", 0.8),
        (" 0.25 ", 0.25),
        (1.7, 1.0),
        (-3, 0.0),
        ("high", 0.5),
        (True, 0.5),
        ([0.9], 0.5),
        ("nan", 0.5),
        ("inf", 1.0),
    ],
)
def test_confidence_is_defaulted_clamped_and_parsed(raw: Any, expected: float) -> None:
    body: dict[str, Any] = {"reply": "x"}
    if raw is not None:
        body["confidence"] = raw
    assert parse_json_decision(json.dumps(body)).confidence == expected


# --- rule 7: thought ---------------------------------------------------------------------------


def test_thought_is_clipped_to_200_chars() -> None:
    decision = parse_json_decision(json.dumps({"thought": "é" * 250, "reply": "x"}))
    assert decision.thought == "é" * 200


# --- rule 8: no action -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "action", ["none", "NONE", "null", "", "  ", "final", "Reply", "respond", "answer", None]
)
def test_no_action_values(action: str | None) -> None:
    decision = parse_json_decision(json.dumps({"action": action, "params": {}, "reply": "Done"}))
    assert decision.actions == []
    assert decision.reply == "Done"


def test_no_action_items_inside_the_list_are_skipped() -> None:
    text = json.dumps({"actions": [{"action": "none"}, {"action": "get_post"}]})
    assert parse_json_decision(text).actions == [ActionCall(id="call_0", name="get_post")]


def test_item_without_an_action_name_is_an_error() -> None:
    message = invalid('{"actions": [{"action": "get_post"}, {"params": {"id": 1}}]}')
    assert 'needs an "action" name' in message
    assert '{"params": {"id": 1}}' in message


def test_non_string_action_is_an_error() -> None:
    assert "must be a string" in invalid('{"action": 12}')


# --- rule 9: action plus actions, at most 6 ----------------------------------------------------


def test_top_level_action_goes_before_the_list() -> None:
    text = json.dumps(
        {
            "action": "get_post",
            "params": {"id": 1},
            "actions": [{"action": "get_post", "params": {"id": 2}}, {"action": "list_posts"}],
        }
    )
    decision = parse_json_decision(text)
    assert [(c.name, c.params) for c in decision.actions] == [
        ("get_post", {"id": 1}),
        ("get_post", {"id": 2}),
        ("list_posts", {}),
    ]


def test_top_level_action_repeated_as_first_item_is_counted_once() -> None:
    text = json.dumps(
        {
            "action": "get_post",
            "params": '{"id": 1}',
            "actions": [{"tool": " get_post ", "args": {"id": 1}}, {"action": "list_posts"}],
        }
    )
    assert names(parse_json_decision(text)) == ["get_post", "list_posts"]


def test_six_actions_are_allowed() -> None:
    text = json.dumps({"action": "a0", "actions": [{"action": f"a{i}"} for i in range(1, 6)]})
    assert names(parse_json_decision(text)) == [f"a{i}" for i in range(6)]


def test_seven_actions_are_an_error() -> None:
    message = invalid(json.dumps({"actions": [{"action": f"a{i}"} for i in range(7)]}))
    assert "at most 6" in message
    assert "Split the plan over several rounds" in message


def test_top_level_action_plus_six_listed_is_seven() -> None:
    text = json.dumps({"action": "extra", "actions": [{"action": f"a{i}"} for i in range(6)]})
    assert "7 actions" in invalid(text)


def test_single_action_object_instead_of_a_list() -> None:
    text = json.dumps({"actions": {"action": "get_post", "params": {"id": 1}}})
    assert parse_json_decision(text).actions[0].params == {"id": 1}


def test_actions_that_are_not_a_list_or_items_not_objects_are_errors() -> None:
    assert "must be a list" in invalid('{"actions": "get_post"}')
    assert "`actions[1]`" in invalid('{"actions": [{"action": "a"}, "b"]}')


# --- rule 10: ids and names --------------------------------------------------------------------


def test_ids_use_the_prefix_and_names_are_stripped() -> None:
    text = json.dumps({"actions": [{"action": "  get_post\n"}, {"action": "\tlist_posts "}]})
    decision = parse_json_decision(text, id_prefix="r3")
    assert decision.actions == [
        ActionCall(id="r3_0", name="get_post"),
        ActionCall(id="r3_1", name="list_posts"),
    ]


# --- rules 11 and 12: nothing usable -----------------------------------------------------------


def test_plain_prose_is_an_error() -> None:
    with pytest.raises(InvalidModelOutput) as info:
        parse_json_decision("The post has been updated, let me know if you need more.")
    assert str(info.value).startswith("The answer contains no JSON object.")
    assert '"reply"' in info.value.message
    assert isinstance(info.value, RunFailure)


@pytest.mark.parametrize("text", ["", "   ", "[1, 2, 3]", "{'action': 'python dict'}"])
def test_empty_and_non_object_answers_are_errors(text: str) -> None:
    assert "contains no JSON object" in invalid(text)


@pytest.mark.parametrize(
    "text", ["{}", '{"foo": 1}', '{"thought": "hmm"}', '{"reply": "   "}', '{"action": "none"}']
)
def test_object_without_action_or_reply_is_an_error(text: str) -> None:
    message = invalid(text)
    assert "neither an action nor a reply" in message
    assert "`reply`" in message


# --- unicode -----------------------------------------------------------------------------------


def test_unicode_in_prose_keys_and_values() -> None:
    text = 'Voilà 🙂 {"thought": "Titre en français", "action": "create_post", ' + (
        '"params": {"title": "Café ☕ \\u00e9t\\u00e9", "emoji": "🚀"}} — fin'
    )
    decision = parse_json_decision(text)
    assert decision.thought == "Titre en français"
    assert decision.actions[0].params == {"title": "Café ☕ été", "emoji": "🚀"}

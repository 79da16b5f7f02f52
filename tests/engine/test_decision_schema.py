"""The JSON decision protocol's schema (`decision_schema`): a valid JSON Schema that accepts good
decisions, rejects bad ones and caps every string."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from pydantic import BaseModel

from pressloop.contracts import ActionCall, Decision
from pressloop.engine.decision_parser import decision_schema, parse_json_decision

POST_PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "title": {"type": "string"},
        "status": {"type": "string", "enum": ["draft", "publish"], "maxLength": 10},
        "tags": {"type": "array", "items": {"type": "string"}},
        "meta": {
            "type": "object",
            "properties": {"note": {"type": ["string", "null"]}},
            "additionalProperties": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
        },
        "example": {"type": "string", "default": {"type": "string"}},
        "default": {"type": "string"},  # a parameter named like a keyword is still a schema
        "author": {"$ref": "#/$defs/name"},
    },
    "$defs": {"name": {"type": "string"}},
    "required": ["title"],
    "additionalProperties": False,
}
GET_PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {"id": {"type": "integer"}},
    "required": ["id"],
}


def schema() -> dict[str, Any]:
    return decision_schema([("create_post", POST_PARAMS), ("get_post", GET_PARAMS)])


def decision(actions: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    return {"thought": "t", "actions": actions, "reply": "", "confidence": 0.5, **fields}


def test_schema_is_valid_json_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(schema())
    jsonschema.Draft7Validator.check_schema(schema())


def test_schema_top_level_shape() -> None:
    built = schema()
    assert built["type"] == "object"
    assert built["properties"]["thought"] == {"type": "string", "maxLength": 200}
    assert built["properties"]["reply"] == {"type": "string", "maxLength": 2000}
    assert built["properties"]["confidence"] == {"type": "number", "minimum": 0, "maximum": 1}
    assert built["properties"]["actions"]["maxItems"] == 6
    branches = built["properties"]["actions"]["items"]["anyOf"]
    assert [b["properties"]["action"] for b in branches] == [
        {"const": "create_post"},
        {"const": "get_post"},
    ]
    assert branches[1] == {
        "type": "object",
        "properties": {"action": {"const": "get_post"}, "params": GET_PARAMS},
        "required": ["action", "params"],
        "additionalProperties": False,
    }


@pytest.mark.parametrize(
    "instance",
    [
        decision([]),
        decision([{"action": "get_post", "params": {"id": 1}}], reply="hi", confidence=1),
        {"thought": "t", "actions": [], "reply": ""},  # confidence may be left out
        decision(
            [
                {"action": "create_post", "params": {"title": "x", "meta": {"n": 3}}},
                {"action": "get_post", "params": {"id": 2}},
            ]
        ),
    ],
)
def test_schema_accepts_good_decisions(instance: dict[str, Any]) -> None:
    jsonschema.validate(instance, schema())


@pytest.mark.parametrize(
    "instance",
    [
        decision([{"action": "delete_site", "params": {}}]),  # unknown action
        decision([{"action": "get_post"}]),  # params missing
        decision([{"action": "get_post", "params": {"id": "one"}}]),  # wrong param type
        decision([{"action": "get_post", "params": {"id": 1}, "extra": 1}]),
        decision([{"action": "get_post", "params": {"id": i}} for i in range(7)]),
        decision([{"action": "create_post", "params": {"title": "x" * 4001}}]),
        decision([{"action": "create_post", "params": {"title": "x", "tags": ["y" * 4001]}}]),
        decision([{"action": "create_post", "params": {"title": "x", "author": "y" * 4001}}]),
        decision([], thought="x" * 201),
        decision([], reply="x" * 2001),
        decision([], confidence=1.5),
        decision([], surprise=True),
        {"thought": "t", "actions": []},  # reply missing
    ],
)
def test_schema_rejects_bad_decisions(instance: dict[str, Any]) -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(instance, schema())


def test_schema_caps_every_string_recursively_without_touching_the_input() -> None:
    before = json.dumps(POST_PARAMS, sort_keys=True)
    params = schema()["properties"]["actions"]["items"]["anyOf"][0]["properties"]["params"]
    props = params["properties"]
    assert props["title"] == {"type": "string", "maxLength": 4000}
    assert props["status"]["maxLength"] == 10  # an existing limit is kept
    assert props["tags"]["items"] == {"type": "string", "maxLength": 4000}
    assert props["meta"]["properties"]["note"]["maxLength"] == 4000
    assert props["meta"]["additionalProperties"]["anyOf"] == [
        {"type": "string", "maxLength": 4000},
        {"type": "integer"},
    ]
    assert props["example"]["default"] == {"type": "string"}  # data, not a schema
    assert props["default"] == {"type": "string", "maxLength": 4000}
    assert "$defs" not in params
    assert props["author"] == {"$ref": "#/$defs/create_post.name"}
    assert json.dumps(POST_PARAMS, sort_keys=True) == before


def test_schema_moves_local_definitions_to_the_root_so_references_resolve() -> None:
    class Author(BaseModel):
        name: str

    class NewPost(BaseModel):
        title: str
        author: Author

    built = decision_schema([("wp/create-post", NewPost.model_json_schema())])
    jsonschema.Draft202012Validator.check_schema(built)
    assert built["$defs"] == {
        "wp_create-post.Author": {
            "type": "object",
            "title": "Author",
            "properties": {"name": {"type": "string", "title": "Name", "maxLength": 4000}},
            "required": ["name"],
        }
    }
    good = {"action": "wp/create-post", "params": {"title": "T", "author": {"name": "Ann"}}}
    jsonschema.validate(decision([good]), built)
    long_name = {
        "action": "wp/create-post",
        "params": {"title": "T", "author": {"name": "n" * 4001}},
    }
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(decision([long_name]), built)
    assert "$defs" not in decision_schema([("get_post", GET_PARAMS)])


def test_schema_with_no_actions_only_allows_an_empty_list() -> None:
    built = decision_schema([])
    jsonschema.Draft202012Validator.check_schema(built)
    jsonschema.validate(decision([], reply="just talk"), built)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(decision([{"action": "x", "params": {}}]), built)


def test_parser_reads_what_the_schema_allows() -> None:
    answer = decision(
        [{"action": "create_post", "params": {"title": "Hi"}}], thought="plan", confidence=0.7
    )
    jsonschema.validate(answer, schema())
    assert parse_json_decision(json.dumps(answer)) == Decision(
        thought="plan",
        actions=[ActionCall(id="call_0", name="create_post", params={"title": "Hi"})],
        confidence=0.7,
    )

"""Request bodies as JSON bytes, the tool catalog serialized once (`wire.RequestBodies`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from pressloop.providers.base import ToolSpec
from pressloop.providers.wire import MAX_SERIALIZED_CATALOGS, RequestBodies


def tool(name: str, schema: dict[str, Any] | None = None) -> ToolSpec:
    return ToolSpec(
        name=name,
        description=f"Does {name}.",
        parameters=schema if schema is not None else {"type": "object", "properties": {}},
    )


class CountingRender:
    """A provider's catalog shape, counting how often a catalog is rendered."""

    def __init__(self) -> None:
        self.catalogs: list[list[str]] = []

    def __call__(self, tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
        self.catalogs.append([t.name for t in tools])
        return [
            {"name": t.name, "description": t.description, "schema": t.parameters} for t in tools
        ]


def test_the_body_and_its_tools_are_one_json_object() -> None:
    bodies = RequestBodies(CountingRender())
    schema = {"type": "object", "properties": {"title": {"type": "string", "title": "Titre é"}}}
    body = {"model": "m", "messages": [{"role": "user", "content": 'héllo \u2028 "quoted"'}]}

    sent = json.loads(bodies.encode(body, [tool("create_post", schema)]))

    assert sent == {
        **body,
        "tools": [{"name": "create_post", "description": "Does create_post.", "schema": schema}],
    }
    assert json.loads(bodies.encode(body, [])) == body
    assert json.loads(bodies.encode({}, [tool("a")]))["tools"][0]["name"] == "a"


def test_a_catalog_is_rendered_once_however_often_it_is_sent() -> None:
    render = CountingRender()
    bodies = RequestBodies(render)
    schemas: list[dict[str, Any]] = [
        {"type": "object", "properties": {}},
        {"type": "object", "required": ["x"]},
    ]

    for turn in range(5):
        # Each call builds new ToolSpecs (as the engine does) around the catalog's schemas.
        catalog = [tool("a", schemas[0]), tool("b", schemas[1])]
        sent = json.loads(bodies.encode({"model": "m", "turn": turn}, catalog))
        assert [t["name"] for t in sent["tools"]] == ["a", "b"] and sent["turn"] == turn

    assert render.catalogs == [["a", "b"]]


def test_a_changed_catalog_is_rendered_again() -> None:
    render = CountingRender()
    bodies = RequestBodies(render)
    schema = {"type": "object"}
    bodies.encode({"model": "m"}, [tool("a", schema)])

    # A new schema object (the registry rebuilt its catalog), a new description, another tool.
    new_schema = {"type": "object", "required": ["y"]}
    assert (
        json.loads(bodies.encode({"model": "m"}, [tool("a", new_schema)]))["tools"][0]["schema"]
        == new_schema
    )
    described = ToolSpec(name="a", description="Does it otherwise.", parameters=schema)
    assert (
        json.loads(bodies.encode({"model": "m"}, [described]))["tools"][0]["description"]
        == "Does it otherwise."
    )
    bodies.encode({"model": "m"}, [tool("a", schema), tool("b", schema)])

    assert len(render.catalogs) == 4


def test_only_the_catalogs_last_used_are_kept() -> None:
    render = CountingRender()
    bodies = RequestBodies(render)
    catalogs = [[tool(f"t{n}")] for n in range(MAX_SERIALIZED_CATALOGS + 1)]
    for catalog in catalogs:
        bodies.encode({"model": "m"}, catalog)
    bodies.encode({"model": "m"}, catalogs[-1])  # still kept
    assert len(render.catalogs) == MAX_SERIALIZED_CATALOGS + 1

    bodies.encode({"model": "m"}, catalogs[0])  # the oldest was dropped: rendered again

    assert len(render.catalogs) == MAX_SERIALIZED_CATALOGS + 2


def test_tools_in_the_body_and_numbers_json_cannot_carry_are_refused() -> None:
    bodies = RequestBodies(CountingRender())
    with pytest.raises(ValueError, match="tools"):
        bodies.encode({"model": "m", "tools": []}, [tool("a")])
    with pytest.raises(ValueError):
        bodies.encode({"model": "m", "temperature": float("nan")}, [])

"""The OpenAPI document tells the truth (issue 14, finding 9): every error status an operation can
answer is declared with the shared error body, streams are `text/event-stream` whose frames match
what is declared, statuses are enums, and operation ids are readable and stable."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from pressloop.contracts import EventType, Multitask, RunStatus, Trigger
from tests.api.conftest import Api, ApiFactory, events_only, read_frames

ERROR_BODY = {"$ref": "#/components/schemas/ErrorBody"}
SSE = "text/event-stream"


async def document(api: Api) -> dict[str, Any]:
    answer = await api.client.get("/openapi.json")
    assert answer.status_code == 200
    doc: dict[str, Any] = answer.json()
    return doc


def operations(doc: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, methods in doc["paths"].items():
        for method, operation in methods.items():
            yield method.upper(), path, operation


def validator(doc: dict[str, Any], schema: dict[str, Any]) -> Draft202012Validator:
    """A validator of `schema` whose `#/components/...` references resolve in `doc` (the schema
    is placed in the document, so its references are read from there)."""
    placed = Resource.from_contents({**doc, "x-checked": schema}, DRAFT202012)
    registry: Registry[Any] = Registry().with_resource("urn:openapi", placed)
    return Draft202012Validator({"$ref": "urn:openapi#/x-checked"}, registry=registry)


async def test_operation_ids_are_the_readable_names_of_the_routes(make_api: ApiFactory) -> None:
    doc = await document(await make_api([]))
    ids = [op["operationId"] for _m, _p, op in operations(doc)]
    assert len(ids) == len(set(ids))
    assert all(i.replace("_", "").isalpha() and i.islower() for i in ids), ids
    assert {"post_run", "run_events", "list_threads", "undo", "create_schedule"} <= set(ids)


async def test_every_error_an_operation_answers_is_declared_with_the_error_body(
    make_api: ApiFactory,
) -> None:
    doc = await document(await make_api([]))
    schemas = doc["components"]["schemas"]
    assert schemas["ErrorBody"]["required"] == ["error"]
    assert set(schemas["ErrorDetail"]["properties"]) == {"code", "message"}
    assert "HTTPValidationError" not in schemas  # FastAPI's 422 body is not what we answer

    for method, path, op in operations(doc):
        responses = op["responses"]
        expected = {"422"}
        if op.get("security"):
            expected.add("401")
            if method != "GET":
                expected.add("403")
        if any(p["in"] == "path" for p in op.get("parameters", [])):
            expected.add("404")
        if "requestBody" in op:
            expected |= {"400", "413"}
        assert expected <= set(responses), (method, path, sorted(responses))
        for status, response in responses.items():
            if status.startswith(("4", "5")):
                content = response["content"]["application/json"]["schema"]
                assert content == ERROR_BODY, (method, path, status)

    by_id = {op["operationId"]: op["responses"] for _m, _p, op in operations(doc)}
    assert {"409", "429", "503"} <= set(by_id["post_run"])
    assert by_id["post_run"]["429"]["headers"]["Retry-After"]["required"] is True
    assert {"409", "503"} <= set(by_id["spawn"])
    assert "409" in by_id["requeue_run"] and "409" in by_id["undo"]
    assert "503" in by_id["healthz"] and "401" not in by_id["healthz"]
    assert "403" in by_id["list_tokens"]  # admin only, though a GET


async def test_statuses_and_triggers_are_enums(make_api: ApiFactory) -> None:
    schemas = (await document(await make_api([])))["components"]["schemas"]

    def values(model: str, field: str) -> list[str]:
        prop = schemas[model]["properties"][field]
        if "$ref" in prop:
            prop = schemas[prop["$ref"].rsplit("/", 1)[1]]
        return list(prop["enum"]) if "enum" in prop else [prop["const"]]

    assert values("RunOut", "status") == [s.value for s in RunStatus]
    assert values("RunOut", "trigger") == [t.value for t in Trigger]
    assert values("RunOut", "multitask") == [m.value for m in Multitask]
    assert values("ThreadOut", "status") == ["idle"]
    assert values("ScheduleOut", "status") == ["active", "paused"]
    assert values("LedgerOut", "risk") == ["read", "write", "destructive"]


async def test_streams_are_declared_as_event_streams_and_their_frames_match(
    make_api: ApiFactory,
) -> None:
    api = await make_api([{"text": "Hello."}], server=True)
    doc = await document(api)
    by_id = {op["operationId"]: op for _m, _p, op in operations(doc)}
    for name in ("post_run", "run_events"):
        content = by_id[name]["responses"]["200"]["content"]
        assert set(content) == {"application/json", SSE}, name
    frame_schema = by_id["run_events"]["responses"]["200"]["content"][SSE]["schema"]
    assert frame_schema["properties"]["event"]["enum"] == [t.value for t in EventType]
    event_schema = frame_schema["properties"]["data"]["contentSchema"]

    thread_id = await api.thread()
    async with api.client.stream(
        "POST",
        f"/v1/threads/{thread_id}/runs",
        json={"message": "hi", "mode": "stream"},
        headers=api.auth(),
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith(SSE)
        frames = events_only(await read_frames(response))
    assert [f.event for f in frames][-1] == EventType.RUN_FINISHED.value
    for frame in frames:
        sent = {"event": frame.event, "id": str(frame.id), "data": json.dumps(frame.data)}
        validator(doc, frame_schema).validate(sent)
        validator(doc, event_schema).validate(json.loads(sent["data"]))

"""Auth and errors: every failure is JSON `{"error": {"code", "message"}}` with the right status."""

from __future__ import annotations

from typing import Any

import httpx

from tests.api.conftest import ApiFactory


def error_of(response: httpx.Response, status: int, code: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}
    assert "Traceback" not in response.text
    if code is not None:
        assert body["error"]["code"] == code
    error: dict[str, Any] = body["error"]
    return error


async def test_no_token_or_a_bad_token_is_401(make_api: ApiFactory) -> None:
    api = await make_api()
    missing = await api.client.get("/v1/threads")
    assert "API token" in error_of(missing, 401, "unauthorized")["message"]
    assert missing.headers["www-authenticate"] == "Bearer"
    bad = await api.client.get("/v1/threads", headers={"Authorization": "Bearer plt_nope"})
    assert "not valid" in error_of(bad, 401, "unauthorized")["message"]
    basic = await api.client.get("/v1/threads", headers={"Authorization": "Basic eDp5"})
    error_of(basic, 401, "unauthorized")


async def test_roles_decide_who_may_do_what(make_api: ApiFactory) -> None:
    api = await make_api([{"text": "hi"}])
    thread_id = await api.thread()

    posted = await api.client.post(
        f"/v1/threads/{thread_id}/runs", json={"message": "hi"}, headers=api.auth("viewer")
    )
    assert "operator" in error_of(posted, 403, "forbidden")["message"]
    created = await api.client.post("/v1/threads", json={}, headers=api.auth("viewer"))
    error_of(created, 403, "forbidden")
    token = await api.client.post(
        "/v1/tokens", json={"name": "x", "role": "viewer"}, headers=api.auth("operator")
    )
    assert "admin" in error_of(token, 403, "forbidden")["message"]
    # Reading is open to every role; nothing ran, so the model was never asked.
    for role in ("viewer", "operator", "admin"):
        assert (await api.client.get("/v1/threads", headers=api.auth(role))).status_code == 200
    assert api.scripted.requests == []


async def test_malformed_bodies_are_422_with_a_readable_message(make_api: ApiFactory) -> None:
    api = await make_api()
    thread_id = await api.thread()
    url = f"/v1/threads/{thread_id}/runs"

    missing = await api.client.post(url, json={}, headers=api.auth())
    assert "body.message: Field required" in error_of(missing, 422, "invalid_request")["message"]
    wrong_type = await api.client.post(url, json={"message": 5}, headers=api.auth())
    assert "body.message" in error_of(wrong_type, 422)["message"]
    bad_mode = await api.client.post(url, json={"message": "x", "mode": "fast"}, headers=api.auth())
    assert "body.mode" in error_of(bad_mode, 422)["message"]
    unknown = await api.client.post(url, json={"message": "x", "colour": 1}, headers=api.auth())
    assert "body.colour" in error_of(unknown, 422)["message"]
    not_json = await api.client.post(
        url,
        content=b'{"message": ',
        headers={**api.auth(), "Content-Type": "application/json"},
    )
    assert "not valid JSON" in error_of(not_json, 422, "invalid_request")["message"]
    # curl's -d without a JSON content type: the error says what to send, and nothing runs.
    as_form = await api.client.post(
        url,
        content=b'{"message": "hello"}',
        headers={**api.auth(), "Content-Type": "application/x-www-form-urlencoded"},
    )
    said = error_of(as_form, 422, "invalid_request")["message"]
    assert "Content-Type: application/json" in said
    assert "application/x-www-form-urlencoded" in said
    empty = await api.client.post(url, json={"message": "   "}, headers=api.auth())
    assert "empty" in error_of(empty, 422, "invalid_request")["message"]
    assert api.scripted.requests == []


async def test_too_long_messages_and_bodies_are_413(make_api: ApiFactory) -> None:
    api = await make_api(max_message_chars=50, max_body_bytes=10_000)
    thread_id = await api.thread()
    url = f"/v1/threads/{thread_id}/runs"

    long = await api.client.post(url, json={"message": "x" * 51}, headers=api.auth())
    assert "limit is 50" in error_of(long, 413, "payload_too_large")["message"]
    huge = await api.client.post(url, json={"message": "x" * 20_000}, headers=api.auth())
    assert "10000" in error_of(huge, 413, "payload_too_large")["message"]
    runs = await api.client.get("/v1/runs", headers=api.auth())
    assert runs.json() == []


async def test_unknown_things_are_404(make_api: ApiFactory) -> None:
    api = await make_api()
    viewer = api.auth("viewer")
    thread = await api.client.get("/v1/threads/thr_missing", headers=viewer)
    assert "thr_missing" in error_of(thread, 404, "not_found")["message"]
    post = await api.client.post(
        "/v1/threads/thr_missing/runs", json={"message": "hi"}, headers=api.auth()
    )
    error_of(post, 404, "not_found")
    for path in ("/v1/runs/run_missing", "/v1/runs/run_missing/events"):
        error_of(await api.client.get(path, headers=viewer), 404, "not_found")
    stream = await api.client.get(
        "/v1/runs/run_missing/events", headers={**viewer, "Accept": "text/event-stream"}
    )
    error_of(stream, 404, "not_found")
    cancel = await api.client.post("/v1/runs/run_missing/cancel", headers=api.auth())
    error_of(cancel, 404, "not_found")
    route = await api.client.get("/v1/nothing-here", headers=viewer)
    error_of(route, 404, "not_found")
    method = await api.client.delete("/v1/threads", headers=viewer)
    error_of(method, 405, "method_not_allowed")


async def test_a_bad_last_event_id_is_422(make_api: ApiFactory) -> None:
    api = await make_api([{"text": "hi"}])
    thread_id = await api.thread()
    run = (
        await api.client.post(
            f"/v1/threads/{thread_id}/runs", json={"message": "hi"}, headers=api.auth()
        )
    ).json()["run"]
    response = await api.client.get(
        f"/v1/runs/{run['id']}/events",
        headers={**api.auth(), "Accept": "text/event-stream", "Last-Event-ID": "seven"},
    )
    assert "Last-Event-ID" in error_of(response, 422, "invalid_request")["message"]


async def test_an_unexpected_error_is_a_500_without_details(make_api: ApiFactory) -> None:
    api = await make_api()

    @api.app.get("/boom")
    async def boom() -> None:
        raise RuntimeError("secret internals /etc/passwd")

    response = await api.client.get("/boom")
    error = error_of(response, 500, "internal_error")
    assert "secret" not in response.text and "server log" in error["message"]

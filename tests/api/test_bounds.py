"""Bad input at the edges of the HTTP API (issue 14, finding 9): out-of-range numbers, text that
cannot be stored and odd headers answer 422 with `{"error": {"code", "message"}}`, never a 500,
and leave no traceback in the log (both databases)."""

from __future__ import annotations

import logging
import re
from typing import Any

import pytest

from pressloop.api.bounds import whole_number_pattern
from tests.api.conftest import Api, ApiFactory, events_only, read_frames
from tests.api.test_errors import error_of

# One past the largest 64-bit integer; and one past PostgreSQL's INTEGER, what ids, event
# numbers and intervals are stored as.
PAST_INT64 = 9223372036854775808
PAST_INT32 = 2**31


def nothing_logged(caplog: pytest.LogCaptureFixture) -> None:
    bad = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert not bad, [r.getMessage() for r in bad]


async def finished_run(api: Api) -> dict[str, Any]:
    thread_id = await api.thread()
    answer = await api.client.post(
        f"/v1/threads/{thread_id}/runs", json={"message": "hi"}, headers=api.auth()
    )
    assert answer.status_code == 200, answer.text
    run: dict[str, Any] = answer.json()["run"]
    return run


async def post_json(api: Api, path: str, raw: bytes) -> Any:
    """A body as raw bytes: JSON escapes a client library would refuse to write."""
    headers = {**api.auth("admin"), "Content-Type": "application/json"}
    return await api.client.post(path, content=raw, headers=headers)


async def test_an_event_offset_past_any_stored_number_is_422(
    make_api: ApiFactory, caplog: pytest.LogCaptureFixture
) -> None:
    api = await make_api([{"text": "hi"}])
    run = await finished_run(api)
    for after in (PAST_INT64, PAST_INT32, -1):
        answer = await api.client.get(
            f"/v1/runs/{run['id']}/events", params={"after": after}, headers=api.auth()
        )
        assert "after" in error_of(answer, 422, "invalid_request")["message"]
    largest = await api.client.get(
        f"/v1/runs/{run['id']}/events", params={"after": PAST_INT32 - 1}, headers=api.auth()
    )
    assert largest.status_code == 200 and largest.json() == []
    nothing_logged(caplog)


async def test_a_ledger_id_past_any_stored_number_is_422(
    make_api: ApiFactory, caplog: pytest.LogCaptureFixture
) -> None:
    api = await make_api([])
    for entry_id in (PAST_INT64, PAST_INT32, 0, -5):
        answer = await api.client.post(f"/v1/ledger/{entry_id}/undo", headers=api.auth())
        assert "entry_id" in error_of(answer, 422, "invalid_request")["message"]
    missing = await api.client.post(f"/v1/ledger/{PAST_INT32 - 1}/undo", headers=api.auth())
    error_of(missing, 404, "not_found")
    nothing_logged(caplog)


async def test_schedules_out_of_range_are_422(
    make_api: ApiFactory, caplog: pytest.LogCaptureFixture
) -> None:
    api = await make_api([])
    for interval in (b"1e23", str(PAST_INT64).encode(), str(PAST_INT32).encode(), b"0"):
        answer = await post_json(
            api, "/v1/schedules", b'{"kind": "interval", "interval_s": ' + interval + b"}"
        )
        assert "interval_s" in error_of(answer, 422, "invalid_request")["message"]
    # A cron rule whose day never comes (31 February) has no next beat.
    never = await api.client.post(
        "/v1/schedules", json={"kind": "cron", "cron": "0 0 31 2 *"}, headers=api.auth()
    )
    assert "cron" in error_of(never, 422, "invalid_request")["message"]
    listed = await api.client.get("/v1/schedules", headers=api.auth())
    assert listed.json() == []
    nothing_logged(caplog)


@pytest.mark.parametrize(
    ("path", "raw"),
    [
        ("runs", b'{"message": "hello \\ud800"}'),  # a lone surrogate: no UTF-8 for it
        ("runs", b'{"message": "lone low \\udfff end"}'),
        ("runs", b'{"message": "a NUL \\u0000 inside"}'),  # PostgreSQL text cannot hold it
        ("runs", b'{"message": "hi", "idempotency_key": "\\ud83d"}'),
        ("runs", b'{"message": "hi", "policy": {"wall_time_s": NaN}}'),
        ("runs", b'{"message": "hi", "policy": {"wall_time_s": Infinity}}'),
        ("runs", b'{"message": "hi", "policy": {"max_rounds": 1e23}}'),
        ("threads", b'{"title": "\\ud800"}'),
        ("threads", b'{"metadata": {"\\udc00key": 1}}'),
        ("threads", b'{"metadata": {"deep": [[["\\u0000"]]]}}'),
        ("threads", b'{"metadata": {"n": Infinity}}'),
        ("threads", b'{"metadata": {"n": NaN}}'),
        ("threads", b'{"metadata": ' + b"[" * 40 + b"]" * 40 + b"}"),
        ("spawn", b'{"message": "child \\ud800"}'),
        ("schedules", b'{"kind": "interval", "interval_s": 60, "message": "\\ud800"}'),
    ],
)
async def test_text_and_numbers_that_cannot_be_stored_are_422(
    make_api: ApiFactory, caplog: pytest.LogCaptureFixture, path: str, raw: bytes
) -> None:
    api = await make_api([])
    thread_id = await api.thread()
    url = {
        "runs": f"/v1/threads/{thread_id}/runs",
        "threads": "/v1/threads",
        "spawn": f"/v1/threads/{thread_id}/spawn",
        "schedules": "/v1/schedules",
    }[path]
    answer = await post_json(api, url, raw)
    error_of(answer, 422, "invalid_request")
    # Nothing was stored and the model was never asked.
    runs = await api.client.get("/v1/runs", headers=api.auth())
    assert runs.json() == []
    threads = await api.client.get("/v1/threads", headers=api.auth())
    assert [t["id"] for t in threads.json()] == [thread_id]
    assert api.scripted.requests == []
    nothing_logged(caplog)


async def test_nul_in_a_path_or_query_is_422(
    make_api: ApiFactory, caplog: pytest.LogCaptureFixture
) -> None:
    api = await make_api([])
    viewer = api.auth("viewer")
    for path in (
        "/v1/threads/thr%00x",
        "/v1/runs/run%00",
        "/v1/runs?thread_id=%00",
        "/v1/approvals/apr%00x",
        "/v1/agents/default%00",
    ):
        error_of(await api.client.get(path, headers=viewer), 422, "invalid_request")
    too_long = await api.client.get(f"/v1/threads/thr_{'x' * 200}", headers=viewer)
    error_of(too_long, 422, "invalid_request")
    nothing_logged(caplog)


async def test_a_huge_last_event_id_is_422_not_an_empty_stream(
    make_api: ApiFactory, caplog: pytest.LogCaptureFixture
) -> None:
    api = await make_api([{"text": "hi"}], server=True)
    run = await finished_run(api)
    stream = {**api.auth("viewer"), "Accept": "text/event-stream"}
    for last in (str(PAST_INT64), str(PAST_INT32), "-1", "seven"):
        answer = await api.client.get(
            f"/v1/runs/{run['id']}/events", headers={**stream, "Last-Event-ID": last}
        )
        assert "Last-Event-ID" in error_of(answer, 422, "invalid_request")["message"], last
    # The largest valid one is a stream with nothing after it, closed at once (the run is over).
    async with api.client.stream(
        "GET",
        f"/v1/runs/{run['id']}/events",
        headers={**stream, "Last-Event-ID": str(PAST_INT32 - 1)},
    ) as response:
        assert response.status_code == 200
        assert events_only(await read_frames(response)) == []
    # A stream asked for with a bad Last-Event-ID starts no run.
    refused = await api.client.post(
        f"/v1/threads/{run['thread_id']}/runs",
        json={"message": "again", "mode": "stream"},
        headers={**api.auth(), "Last-Event-ID": str(PAST_INT64)},
    )
    error_of(refused, 422, "invalid_request")
    runs = await api.client.get("/v1/runs", headers=api.auth())
    assert [r["id"] for r in runs.json()] == [run["id"]]
    nothing_logged(caplog)


async def test_405_names_every_method_the_path_has(make_api: ApiFactory) -> None:
    api = await make_api([])
    viewer = api.auth("viewer")
    for method, path, allowed in [
        ("DELETE", "/v1/threads", {"GET", "POST"}),
        ("PUT", "/v1/schedules", {"GET", "POST"}),
        ("PUT", "/v1/schedules/sch_x", {"DELETE"}),
        ("DELETE", "/v1/runs/run_x", {"GET"}),
        ("POST", "/v1/agents/default", {"GET", "PATCH"}),
        ("DELETE", "/v1/settings", {"GET", "PATCH"}),
        ("OPTIONS", "/v1/tokens", {"GET", "POST"}),
    ]:
        answer = await api.client.request(method, path, headers=viewer)
        error_of(answer, 405, "method_not_allowed")
        said = {m.strip() for m in answer.headers["allow"].split(",")}
        assert said == allowed, (method, path, answer.headers["allow"])


@pytest.mark.parametrize("limit", [0, 7, 10, 99, 205, 2**31 - 1])
def test_the_pattern_of_a_number_header_holds_exactly_zero_to_its_limit(limit: int) -> None:
    pattern = re.compile(whole_number_pattern(limit))
    numbers = set(range(2500)) | {limit - 1, limit, limit + 1, 2**31 - 2, 2**31, 10**10}
    assert [
        n for n in sorted(numbers) if n >= 0 and bool(pattern.match(str(n))) != (n <= limit)
    ] == []
    assert not pattern.match("007") and not pattern.match("-1") and not pattern.match("1 ")

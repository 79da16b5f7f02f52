"""Schedules and spawning over HTTP (both databases)."""

from __future__ import annotations

from pressloop.runtime.heartbeat_runs import Scheduler
from tests.api.conftest import ApiFactory
from tests.conftest import FakeClock


async def test_schedules_create_list_pause_resume_delete(
    make_api: ApiFactory, clock: FakeClock
) -> None:
    api = await make_api([{"text": "HEARTBEAT_OK"}])
    body = {
        "kind": "interval",
        "interval_s": 300,
        "timezone": "Europe/Paris",
        "active_hours": {"start": "00:00", "end": "23:59"},
        "message": "Look around",
    }
    created = await api.client.post("/v1/schedules", json=body, headers=api.auth())
    assert created.status_code == 201, created.text
    schedule = created.json()
    assert schedule["status"] == "active" and schedule["kind"] == "interval"

    viewer_try = await api.client.post("/v1/schedules", json=body, headers=api.auth("viewer"))
    assert viewer_try.status_code == 403
    listed = (await api.client.get("/v1/schedules", headers=api.auth("viewer"))).json()
    assert [s["id"] for s in listed] == [schedule["id"]]

    # The beat produces a heartbeat run.
    clock.advance(301)
    scheduler = Scheduler(
        database=api.service.database, now=api.service.now, max_attempts=3, poll_s=1
    )
    (run_id,) = await scheduler.tick()
    run = (await api.client.get(f"/v1/runs/{run_id}", headers=api.auth("viewer"))).json()
    assert run["trigger"] == "heartbeat" and run["input"] == "Look around"

    paused = await api.client.post(f"/v1/schedules/{schedule['id']}/pause", headers=api.auth())
    assert paused.json()["status"] == "paused"
    resumed = await api.client.post(f"/v1/schedules/{schedule['id']}/resume", headers=api.auth())
    assert resumed.json()["status"] == "active"
    deleted = await api.client.delete(f"/v1/schedules/{schedule['id']}", headers=api.auth())
    assert deleted.status_code == 204
    gone = await api.client.delete(f"/v1/schedules/{schedule['id']}", headers=api.auth())
    assert gone.status_code == 404 and gone.json()["error"]["code"] == "not_found"


async def test_invalid_schedules_are_clear_422s(make_api: ApiFactory) -> None:
    api = await make_api([])
    for body, words in [
        ({"kind": "cron", "cron": "every day at nine"}, "cron"),
        ({"kind": "interval"}, "interval_s"),
        ({"kind": "interval", "interval_s": 60, "timezone": "Mars/Olympus"}, "timezone"),
    ]:
        answer = await api.client.post("/v1/schedules", json=body, headers=api.auth())
        assert answer.status_code == 422, body
        assert words in answer.json()["error"]["message"]


async def test_spawn_a_child_agent_over_http(make_api: ApiFactory) -> None:
    api = await make_api([])
    thread_id = await api.thread()
    body = {"message": "Audit the plugins", "idempotency_key": "audit-1"}
    first = await api.client.post(f"/v1/threads/{thread_id}/spawn", json=body, headers=api.auth())
    assert first.status_code == 201, first.text
    child = first.json()
    assert child["thread"]["parent_id"] == thread_id and child["run"]["trigger"] == "spawned"
    again = await api.client.post(f"/v1/threads/{thread_id}/spawn", json=body, headers=api.auth())
    assert again.json()["thread"]["id"] == child["thread"]["id"]

    grandchild = await api.client.post(
        f"/v1/threads/{child['thread']['id']}/spawn",
        json={"message": "deeper"},
        headers=api.auth(),
    )
    deepest = await api.client.post(
        f"/v1/threads/{grandchild.json()['thread']['id']}/spawn",
        json={"message": "too deep"},
        headers=api.auth(),
    )
    assert deepest.status_code == 409 and "levels deep" in deepest.json()["error"]["message"]

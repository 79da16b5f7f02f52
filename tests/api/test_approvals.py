"""Approvals over HTTP (both databases): the queue, approve, reject, roles."""

from __future__ import annotations

from pressloop.api.frames import PARKED_RETRY_MS
from tests.api.conftest import ApiFactory, events_only, read_frames
from tests.support.actions import Users, delete


async def test_a_destructive_request_waits_for_approval_over_http(make_api: ApiFactory) -> None:
    api = await make_api([delete("bob"), {"text": "Bob is gone."}])
    users = Users()
    for spec in users.specs():
        api.service.registry.register(spec)
    thread_id = await api.thread()
    waited = await api.client.post(
        f"/v1/threads/{thread_id}/runs", json={"message": "delete bob"}, headers=api.auth()
    )
    assert waited.status_code == 200, waited.text
    body = waited.json()
    assert body["run"]["status"] == "waiting_approval"
    assert body["result"]["status"] == "requires_approval"
    pending = (
        await api.client.get("/v1/approvals?status=pending", headers=api.auth("viewer"))
    ).json()
    assert len(pending) == 1 and pending[0]["action"] == "delete_user"
    assert pending[0]["preview"]["before"] == {"user": "bob", "exists": True}
    approval_id = pending[0]["id"]

    viewer = await api.client.post(
        f"/v1/approvals/{approval_id}/approve", json={}, headers=api.auth("viewer")
    )
    assert viewer.status_code == 403 and users.deleted == []

    approved = await api.client.post(
        f"/v1/approvals/{approval_id}/approve", json={"note": "fine"}, headers=api.auth()
    )
    assert approved.status_code == 200 and approved.json()["status"] == "approved"
    run = await api.service.wait(body["run"]["id"], timeout_s=10)
    assert run.status.value == "succeeded" and users.deleted == ["bob"]
    assert run.result is not None and run.result.assistant_text == "Bob is gone."

    again = await api.client.post(
        f"/v1/approvals/{approval_id}/reject", json={}, headers=api.auth()
    )
    assert again.status_code == 409 and "already approved" in again.json()["error"]["message"]
    missing = await api.client.post("/v1/approvals/apr_nope/reject", json={}, headers=api.auth())
    assert missing.status_code == 404


async def test_reject_over_http(make_api: ApiFactory) -> None:
    api = await make_api([delete("bob"), {"text": "Bob stays."}])
    users = Users()
    for spec in users.specs():
        api.service.registry.register(spec)
    thread_id = await api.thread()
    body = (
        await api.client.post(
            f"/v1/threads/{thread_id}/runs", json={"message": "delete bob"}, headers=api.auth()
        )
    ).json()
    (approval,) = (await api.client.get("/v1/approvals", headers=api.auth())).json()
    rejected = await api.client.post(
        f"/v1/approvals/{approval['id']}/reject", json={"note": "no"}, headers=api.auth()
    )
    assert rejected.json()["status"] == "rejected"
    run = await api.service.wait(body["run"]["id"], timeout_s=10)
    assert run.status.value == "succeeded" and users.deleted == []


async def test_a_stream_that_ends_on_a_parked_run_asks_the_client_to_come_back_later(
    make_api: ApiFactory,
) -> None:
    api = await make_api([delete("bob"), {"text": "Bob is gone."}])
    users = Users()
    for spec in users.specs():
        api.service.registry.register(spec)
    thread_id = await api.thread()
    async with api.client.stream(
        "POST",
        f"/v1/threads/{thread_id}/runs",
        json={"message": "delete bob", "mode": "stream"},
        headers={**api.auth(), "Accept": "text/event-stream"},
    ) as response:
        frames = events_only(await read_frames(response))
    last = frames[-1]
    assert last.event == "run.finished" and last.data["data"]["status"] == "waiting_approval"
    assert last.retry == PARKED_RETRY_MS
    assert all(f.retry is None for f in frames[:-1])

"""The per-user cooldown over HTTP: 429 with Retry-After, JSON error, nothing queued."""

from __future__ import annotations

from tests.api.conftest import ApiFactory


async def test_a_second_message_too_soon_is_429(make_api: ApiFactory) -> None:
    api = await make_api(cooldown_s=5)
    thread_id = await api.thread()
    first = await api.client.post(
        f"/v1/threads/{thread_id}/runs",
        json={"message": "hi", "mode": "background"},
        headers=api.auth(),
    )
    assert first.status_code == 202
    second = await api.client.post(
        f"/v1/threads/{thread_id}/runs",
        json={"message": "again", "mode": "background"},
        headers=api.auth(),
    )
    assert second.status_code == 429
    assert second.headers["Retry-After"] == "5"
    assert second.json()["error"]["code"] == "rate_limited"
    runs = (await api.client.get(f"/v1/runs?thread_id={thread_id}", headers=api.auth())).json()
    assert len(runs) == 1

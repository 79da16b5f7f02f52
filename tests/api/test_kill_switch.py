"""The kill switch over HTTP: 503 `agent_disabled` before anything is stored, and
`GET /v1/settings` says whether it is on and where from (environment or setting)."""

from __future__ import annotations

from tests.api.conftest import ApiFactory


async def test_the_setting_refuses_messages_with_503_and_stores_nothing(
    make_api: ApiFactory,
) -> None:
    api = await make_api([{"text": "Back again."}])
    thread = await api.thread()
    off = {"agent_disabled": True}
    assert (await api.client.patch("/v1/settings", json=off, headers=api.auth("admin"))).is_success
    shown = (await api.client.get("/v1/settings", headers=api.auth("viewer"))).json()
    assert shown["agent_disabled"] is True and shown["agent_disabled_source"] == "setting"
    assert shown["agent_disabled_by_setting"] is True and shown["agent_disabled_by_env"] is False

    for mode in ("wait", "stream", "background"):
        refused = await api.client.post(
            f"/v1/threads/{thread}/runs", json={"message": "hi", "mode": mode}, headers=api.auth()
        )
        assert refused.status_code == 503, refused.text
        error = refused.json()["error"]
        assert error["code"] == "agent_disabled" and "agent_disabled setting" in error["message"]
    spawn = await api.client.post(
        f"/v1/threads/{thread}/spawn", json={"message": "a child"}, headers=api.auth()
    )
    assert spawn.status_code == 503 and spawn.json()["error"]["code"] == "agent_disabled"
    detail = (await api.client.get(f"/v1/threads/{thread}", headers=api.auth())).json()
    assert detail["messages"] == [] and detail["runs"] == [] and detail["children"] == []

    on = {"agent_disabled": False}
    assert (await api.client.patch("/v1/settings", json=on, headers=api.auth("admin"))).is_success
    shown = (await api.client.get("/v1/settings", headers=api.auth("viewer"))).json()
    assert shown["agent_disabled"] is False and shown["agent_disabled_source"] is None
    again = await api.client.post(
        f"/v1/threads/{thread}/runs", json={"message": "hi"}, headers=api.auth()
    )
    assert again.status_code == 200 and again.json()["run"]["status"] == "succeeded"
    sent = api.scripted.requests[-1].messages
    assert [m.content for m in sent] == ["hi"]  # no refused message came back to the model


async def test_the_environment_switch_is_reported_and_wins_over_the_setting(
    make_api: ApiFactory,
) -> None:
    api = await make_api([], disable_agent=True)
    on = {"agent_disabled": False}
    changed = await api.client.patch("/v1/settings", json=on, headers=api.auth("admin"))
    shown = changed.json()
    assert shown["agent_disabled"] is True and shown["agent_disabled_source"] == "environment"
    assert shown["agent_disabled_by_env"] is True and shown["agent_disabled_by_setting"] is False
    thread = await api.thread()
    refused = await api.client.post(
        f"/v1/threads/{thread}/runs", json={"message": "hi"}, headers=api.auth()
    )
    assert refused.status_code == 503
    assert "PRESSLOOP_DISABLE_AGENT" in refused.json()["error"]["message"]
    runs = (await api.client.get(f"/v1/runs?thread_id={thread}", headers=api.auth())).json()
    assert runs == []

"""Agents over HTTP: files and policy overrides reach the turns; only admins change them."""

from __future__ import annotations

from tests.api.conftest import ApiFactory


async def test_agent_files_and_policy_shape_the_next_turns(make_api: ApiFactory) -> None:
    api = await make_api([{"text": "ok"}])
    change = {
        "instructions": "Answer in French.",
        "files": {"SOUL.md": "Patient and precise.", "HEARTBEAT.md": "Check the comments."},
        "policy": {"api": {"max_rounds": 2, "destructive": "deny"}},  # HTTP runs are `api`
    }
    operator = await api.client.patch("/v1/agents/default", json=change, headers=api.auth())
    assert operator.status_code == 403
    admin = await api.client.patch("/v1/agents/default", json=change, headers=api.auth("admin"))
    assert admin.status_code == 200, admin.text
    assert admin.json()["files"]["SOUL.md"] == "Patient and precise."

    thread_id = await api.thread()
    body = (
        await api.client.post(
            f"/v1/threads/{thread_id}/runs", json={"message": "hi"}, headers=api.auth()
        )
    ).json()
    run = await api.service.get_run(body["run"]["id"])
    assert run.policy.max_rounds == 2 and run.policy.destructive.value == "deny"
    system = api.scripted.requests[0].system
    assert "Answer in French." in system and "## SOUL.md\nPatient and precise." in system

    bad = await api.client.patch(
        "/v1/agents/default", json={"policy": {"max_rounds": "many"}}, headers=api.auth("admin")
    )
    assert bad.status_code == 422
    unknown = await api.client.patch(
        "/v1/agents/default", json={"files": {"EVIL.md": "x"}}, headers=api.auth("admin")
    )
    assert unknown.status_code == 422
    listed = (await api.client.get("/v1/agents", headers=api.auth("viewer"))).json()
    assert [a["id"] for a in listed] == ["default"]

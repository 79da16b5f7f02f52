"""Site settings over HTTP (kill switch, per-trigger policies) and the UI's session cookie:
admins change, others read; a cookie alone never changes anything without the UI header."""

from __future__ import annotations

from tests.api.conftest import ApiFactory


async def test_settings_change_the_kill_switch_and_the_policies_of_the_next_runs(
    make_api: ApiFactory,
) -> None:
    api = await make_api([{"text": "ok"}])
    shown = (await api.client.get("/v1/settings", headers=api.auth("viewer"))).json()
    assert shown["agent_disabled"] is False
    assert shown["policies"]["api"]["changes"] == {}
    assert shown["policies"]["heartbeat"]["policy"]["destructive"] == "confirm"

    change = {"policies": {"api": {"max_rounds": 3, "write": "confirm"}}, "agent_disabled": True}
    refused = await api.client.patch("/v1/settings", json=change, headers=api.auth("operator"))
    assert refused.status_code == 403
    changed = await api.client.patch("/v1/settings", json=change, headers=api.auth("admin"))
    assert changed.status_code == 200, changed.text
    assert changed.json()["policies"]["api"]["changes"] == {"max_rounds": 3, "write": "confirm"}

    thread_id = await api.thread()
    off = await api.client.post(
        f"/v1/threads/{thread_id}/runs", json={"message": "hi"}, headers=api.auth()
    )
    assert off.status_code == 503 and off.json()["error"]["code"] == "agent_disabled"

    await api.client.patch(
        "/v1/settings", json={"agent_disabled": False}, headers=api.auth("admin")
    )
    on = await api.client.post(
        f"/v1/threads/{thread_id}/runs", json={"message": "again"}, headers=api.auth()
    )
    assert on.json()["run"]["status"] == "succeeded"
    run = await api.service.get_run(on.json()["run"]["id"])
    assert run.policy.max_rounds == 3 and run.policy.write.value == "confirm"

    # A bad policy is refused whole: nothing of the request is kept.
    bad = await api.client.patch(
        "/v1/settings",
        json={"agent_disabled": True, "policies": {"chat": {"max_rounds": 0}}},
        headers=api.auth("admin"),
    )
    assert bad.status_code == 422
    unknown = await api.client.patch(
        "/v1/settings", json={"policies": {"robot": {}}}, headers=api.auth("admin")
    )
    assert unknown.status_code == 422 and "unknown trigger" in unknown.json()["error"]["message"]
    after = (await api.client.get("/v1/settings", headers=api.auth("viewer"))).json()
    assert after["agent_disabled"] is False and after["policies"]["chat"]["changes"] == {}

    reset = await api.client.patch(
        "/v1/settings", json={"policies": {"api": None}}, headers=api.auth("admin")
    )
    assert reset.json()["policies"]["api"]["changes"] == {}


async def test_the_ui_session_cookie_reads_freely_and_changes_only_with_the_ui_header(
    make_api: ApiFactory,
) -> None:
    api = await make_api([{"text": "ok"}])
    token = api.auth("admin")["Authorization"].removeprefix("Bearer ")
    login = await api.client.post(
        "/ui/login",
        content=f"token={token}&next=/ui/runs",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert login.status_code == 303 and login.headers["location"] == "/ui/runs"
    cookie = login.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie
    session = {"Cookie": cookie.split(";")[0]}
    api.client.cookies.clear()  # each request below says itself whether it has the session

    assert (await api.client.get("/v1/threads", headers=session)).status_code == 200
    assert (await api.client.get("/ui/threads", headers=session)).status_code == 200
    without = await api.client.post("/v1/threads", json={}, headers=session)
    assert without.status_code == 403 and "X-Pressloop-UI" in without.json()["error"]["message"]
    with_header = await api.client.post(
        "/v1/threads", json={}, headers={**session, "X-Pressloop-UI": "1"}
    )
    assert with_header.status_code == 201

    # A page without a session goes to the sign-in page; only paths inside the UI are followed.
    api.client.cookies.clear()
    assert (await api.client.get("/ui/runs")).headers["location"] == "/ui/login?next=%2Fui%2Fruns"
    elsewhere = await api.client.post(
        "/ui/login",
        content=f"token={token}&next=https://evil.example/",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert elsewhere.headers["location"] == "/ui/"
    api.client.cookies.clear()
    wrong = await api.client.post(
        "/ui/login",
        content="token=plt_wrong",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert wrong.status_code == 401 and "not valid" in wrong.text
    out = await api.client.post("/ui/logout", headers=session)
    assert out.status_code == 303 and 'pressloop_session=""' in out.headers["set-cookie"]

"""Approvals and the ledger show what happened, over HTTP, on both databases (issue 14, finding 7).

- Edited params are validated when a person approves: invalid, 422 with the reason, and the
  approval stays pending.
- An approval shows the params the step runs with (the edited ones), the agent's, who asked
  (the person and the trigger) and what became of the step.
- The ledger records every write and destructive step's fate: ran, rejected, denied, refused,
  cancelled as well.
"""

from __future__ import annotations

from typing import Any

from tests.api.conftest import Api, ApiFactory
from tests.security.access_helpers import sign_in, ui_cookie
from tests.security.test_headers_and_docs import assert_same_origin_page
from tests.support.actions import Users, delete


async def with_users(make_api: ApiFactory, script: list[dict[str, Any]]) -> tuple[Api, Users]:
    api = await make_api(script)
    users = Users()
    for spec in users.specs():
        api.service.registry.register(spec)
    return api, users


async def start(api: Api, message: str, **body: Any) -> dict[str, Any]:
    thread_id = await api.thread()
    answered = await api.client.post(
        f"/v1/threads/{thread_id}/runs", json={"message": message, **body}, headers=api.auth()
    )
    assert answered.status_code == 200, answered.text
    return dict(answered.json())


async def ledger(api: Api, run_id: str) -> list[dict[str, Any]]:
    rows = await api.client.get(f"/v1/runs/{run_id}/ledger", headers=api.auth("viewer"))
    assert rows.status_code == 200, rows.text
    return list(rows.json())


async def test_invalid_edited_params_are_refused_at_approval_and_it_stays_pending(
    make_api: ApiFactory,
) -> None:
    api, users = await with_users(make_api, [delete("bob"), {"text": "Done."}])
    paused = await start(api, "delete bob")
    (approval,) = (await api.client.get("/v1/approvals", headers=api.auth())).json()
    url = f"/v1/approvals/{approval['id']}"

    invalid = await api.client.post(
        f"{url}/approve", json={"params": {"name": "carol"}}, headers=api.auth()
    )
    assert invalid.status_code == 422, invalid.text
    message = invalid.json()["error"]["message"]
    assert "edited params for delete_user are invalid" in message and "text" in message
    still = (await api.client.get(url, headers=api.auth())).json()
    assert still["status"] == "pending" and still["edited_params"] is None
    assert users.deleted == []

    approved = await api.client.post(
        f"{url}/approve", json={"params": {"text": "carol"}}, headers=api.auth("admin")
    )
    assert approved.status_code == 200 and approved.json()["status"] == "approved"
    run = await api.service.wait(paused["run"]["id"], timeout_s=10)
    assert run.status.value == "succeeded" and users.deleted == ["carol"]

    shown = (await api.client.get(url, headers=api.auth("viewer"))).json()
    assert shown["run_params"] == {"text": "carol"}  # what ran
    assert shown["params"] == {"text": "bob"}  # what the agent asked for
    assert shown["requested_by"] == "operator-user" and shown["trigger"] == "api"
    assert shown["asked_by"] == "operator-user (api)" and shown["decided_by"] == "admin-user"
    assert shown["step"] == "ran" and shown["step_summary"] == "deleted carol"
    (row,) = await ledger(api, run.id)
    assert row["fate"] == "ran" and row["params"] == {"text": "carol"}
    # The model was told a person changed what it asked for.
    told = [m.content for m in api.scripted.requests[-1].messages if m.role.value == "tool"]
    assert any('edited params: {"text": "carol"}' in t for t in told)


async def test_rejected_and_denied_steps_are_in_the_ledger(make_api: ApiFactory) -> None:
    api, users = await with_users(
        make_api, [delete("bob"), {"text": "Bob stays."}, delete("carol"), {"text": "Not allowed."}]
    )
    paused = await start(api, "delete bob")
    (approval,) = (await api.client.get("/v1/approvals", headers=api.auth())).json()
    rejected = await api.client.post(
        f"/v1/approvals/{approval['id']}/reject", json={"note": "he stays"}, headers=api.auth()
    )
    assert rejected.status_code == 200
    run = await api.service.wait(paused["run"]["id"], timeout_s=10)
    assert run.status.value == "succeeded"
    (row,) = await ledger(api, run.id)
    assert row["fate"] == "rejected" and row["action"] == "delete_user"
    assert "he stays" in row["outcome"]["summary"]
    shown = (await api.client.get(f"/v1/approvals/{approval['id']}", headers=api.auth())).json()
    assert shown["status"] == "rejected" and shown["step"] == "rejected"

    denied = await start(api, "delete carol", policy={"destructive": "deny"})
    assert denied["result"]["steps"][0]["status"] == "denied"
    (row,) = await ledger(api, denied["run"]["id"])
    assert row["fate"] == "denied" and row["params"] == {"text": "carol"}
    assert users.deleted == []


async def test_an_approval_of_a_cancelled_run_cannot_be_decided_and_is_closed(
    make_api: ApiFactory,
) -> None:
    api, users = await with_users(make_api, [delete("bob"), {"text": "never"}])
    paused = await start(api, "delete bob")
    run_id = paused["run"]["id"]
    (approval,) = (await api.client.get("/v1/approvals", headers=api.auth())).json()
    cancelled = await api.client.post(f"/v1/runs/{run_id}/cancel", headers=api.auth())
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    url = f"/v1/approvals/{approval['id']}"
    assert (await api.client.get(url, headers=api.auth())).json()["step"] == "cancelled"

    late = await api.client.post(f"{url}/approve", json={}, headers=api.auth())
    assert late.status_code == 409 and "was cancelled" in late.json()["error"]["message"]
    await api.service.approvals.expire_due()  # what a worker does on every tick
    closed = (await api.client.get(url, headers=api.auth())).json()
    assert closed["status"] == "cancelled" and closed["step"] == "cancelled"
    (row,) = await ledger(api, run_id)
    assert row["fate"] == "cancelled" and users.deleted == []


async def test_the_approvals_page_shows_who_asked_and_the_params_that_ran(
    make_api: ApiFactory,
) -> None:
    api, _users = await with_users(make_api, [delete("bob"), {"text": "Done."}])
    paused = await start(api, "delete bob")
    session = await sign_in(api, api.tokens["admin"])
    pending = await api.client.get("/ui/approvals", headers=ui_cookie(session))
    assert pending.status_code == 200
    assert "Asked by <strong>operator-user</strong> (api)" in pending.text
    (approval,) = (await api.client.get("/v1/approvals", headers=api.auth())).json()
    await api.client.post(
        f"/v1/approvals/{approval['id']}/approve",
        json={"params": {"text": "carol"}},
        headers=api.auth("admin"),
    )
    await api.service.wait(paused["run"]["id"], timeout_s=10)
    page = await api.client.get("/ui/approvals", headers=ui_cookie(session))
    history = page.text.split("<h2>History</h2>", 1)[1]
    assert "operator-user (api)" in history and "edited" in history
    assert "&#34;carol&#34;" in history and "asked for" in history and "&#34;bob&#34;" in history
    assert 'data-status="ran"' in history
    assert_same_origin_page(page.text, "pressloop.test", "/ui/approvals")

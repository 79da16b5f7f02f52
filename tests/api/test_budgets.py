"""Daily budgets hold inside a run, over HTTP, on both databases (issue 14, finding 3).

- An action over the budget is answered "refused: budget" (the model tells the person), counted
  in the day's refusals and kept in the ledger; the steps that ran stay in the result.
- A new turn while a budget is spent is a 429 with the reason and Retry-After, and stores
  nothing.
- A model call over the token budget ends the turn, keeping the steps that ran.
- A step a person approved after the budget ran out runs (their explicit decision) and counts;
  the approval, the step, the ledger and the run agree.
"""

from __future__ import annotations

from typing import Any

from tests.api.conftest import Api, ApiFactory
from tests.support.actions import Users


def remember(*contents: str) -> dict[str, Any]:
    calls = [{"name": "remember", "arguments": {"content": c}} for c in contents]
    return {"tool_calls": calls}


async def post(api: Api, thread_id: str, message: str) -> Any:
    return await api.client.post(
        f"/v1/threads/{thread_id}/runs", json={"message": message}, headers=api.auth()
    )


async def fates(api: Api, run_id: str) -> list[str]:
    ledger = await api.client.get(f"/v1/runs/{run_id}/ledger", headers=api.auth("viewer"))
    assert ledger.status_code == 200, ledger.text
    return [row["fate"] for row in ledger.json()]


async def user_usage(api: Api) -> dict[str, Any]:
    rows = (await api.client.get("/v1/usage?scope=user", headers=api.auth("viewer"))).json()
    (row,) = [r for r in rows if r["subject"] == "operator-user"]
    return dict(row)


async def test_a_plan_over_the_action_budget_is_refused_step_by_step_then_the_turn_429s(
    make_api: ApiFactory,
) -> None:
    api = await make_api(
        [remember("a", "b", "c", "d", "e"), {"text": "I saved three; the budget is used up."}],
        budget_user_actions=3,
    )
    thread_id = await api.thread()
    answered = await post(api, thread_id, "remember five things")
    assert answered.status_code == 200, answered.text
    body = answered.json()
    assert body["run"]["status"] == "succeeded"
    steps = body["result"]["steps"]
    assert [s["status"] for s in steps] == ["succeeded"] * 3 + ["refused", "skipped"]
    assert steps[3]["result_summary"].startswith("refused: budget")
    assert "action budget of user operator-user is used up (3 of 3" in steps[3]["result_summary"]
    # The model was told, so it could tell the person.
    told = [m.content for m in api.scripted.requests[-1].messages if m.role.value == "tool"]
    assert any(t.startswith("refused: budget") for t in told)
    assert body["result"]["assistant_text"] == "I saved three; the budget is used up."
    # Every write's fate is in the ledger, the refused one too; the refusal was counted.
    assert await fates(api, body["run"]["id"]) == ["ran", "ran", "ran", "refused"]
    usage = await user_usage(api)
    assert usage["action_calls"] == 3 and usage["refusals"] == 1

    refused = await post(api, thread_id, "and one more")
    assert refused.status_code == 429, refused.text
    error = refused.json()["error"]
    assert error["code"] == "budget_exceeded"
    assert (
        "action budget of user operator-user is used up (3 of 3 actions today)"
        in (error["message"])
    )
    assert "resets at midnight UTC, in 12 h 0 min" in error["message"]
    assert refused.headers["Retry-After"] == str(12 * 3600)  # the clock says 12:00 UTC
    runs = (await api.client.get(f"/v1/runs?thread_id={thread_id}", headers=api.auth())).json()
    assert len(runs) == 1  # nothing was stored for the refused turn
    assert (await user_usage(api))["refusals"] == 2


async def test_a_model_call_over_the_token_budget_ends_the_turn_and_keeps_its_steps(
    make_api: ApiFactory,
) -> None:
    api = await make_api(
        [
            {**remember("teal"), "usage": {"input": 900, "output": 200}},
            {"text": "never asked: the budget is spent"},
        ],
        budget_user_tokens=1000,
    )
    thread_id = await api.thread()
    answered = await post(api, thread_id, "remember that I like teal")
    assert answered.status_code == 200, answered.text
    body = answered.json()
    assert body["run"]["status"] == "failed"
    assert body["run"]["error"]["cls"] == "BudgetExceeded"
    assert (
        "token budget of user operator-user is used up (1100 of 1000"
        in (body["run"]["error"]["message"])
    )
    assert [s["status"] for s in body["result"]["steps"]] == ["succeeded"]
    assert api.scripted.remaining == 1  # the second call was never made
    assert await fates(api, body["run"]["id"]) == ["ran"]

    refused = await post(api, thread_id, "again")
    assert refused.status_code == 429 and "token budget" in refused.json()["error"]["message"]


async def test_a_step_approved_after_the_budget_ran_out_runs_and_everything_agrees(
    make_api: ApiFactory,
) -> None:
    api = await make_api(
        [
            {
                "tool_calls": [
                    {"name": "remember", "arguments": {"content": "bob leaves today"}},
                    {"name": "delete_user", "arguments": {"text": "bob"}},
                ]
            },
            {"text": "Noted, and Bob is gone."},
        ],
        budget_user_actions=1,
    )
    users = Users()
    for spec in users.specs():
        api.service.registry.register(spec)
    thread_id = await api.thread()
    paused = (await post(api, thread_id, "note it and delete bob")).json()
    assert paused["run"]["status"] == "waiting_approval"
    (approval,) = (await api.client.get("/v1/approvals", headers=api.auth())).json()
    assert approval["step"] == "waiting"

    approved = await api.client.post(
        f"/v1/approvals/{approval['id']}/approve", json={}, headers=api.auth()
    )
    assert approved.status_code == 200 and approved.json()["status"] == "approved"
    run = await api.service.wait(paused["run"]["id"], timeout_s=10)
    # The person's approval is their decision: the delete ran though the budget was spent.
    assert run.status.value == "succeeded" and users.deleted == ["bob"]
    assert run.result is not None and run.result.assistant_text == "Noted, and Bob is gone."
    assert [s.status.value for s in run.result.steps] == ["succeeded", "succeeded"]
    assert await fates(api, run.id) == ["ran", "ran"]
    shown = (await api.client.get(f"/v1/approvals/{approval['id']}", headers=api.auth())).json()
    assert shown["status"] == "approved" and shown["step"] == "ran"
    assert shown["step_summary"] == "deleted bob"
    assert (await user_usage(api))["action_calls"] == 2  # counted like any action

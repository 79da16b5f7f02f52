"""A run parked for approval answers with what waits, over HTTP on both databases (issue 14,
finding 11): the answer is Pressloop's statement from the pending step, never the model's claim
that the change is done."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict

from pressloop.actions.registry import ActionResult, ActionServices, ActionSpec
from pressloop.contracts import ActionContext, Risk
from tests.api.conftest import Api, ApiFactory
from tests.support.actions import Users, action


class TaglineParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tagline: str


class Settings:
    def __init__(self) -> None:
        self.tagline = "Just another site"

    async def update(self, p: TaglineParams, _c: ActionContext, _s: ActionServices) -> ActionResult:
        self.tagline = p.tagline
        return ActionResult(content={"tagline": p.tagline}, summary="tagline changed")

    def spec(self) -> ActionSpec:
        return action(
            "update_settings",
            self.update,
            risk=Risk.DESTRUCTIVE,
            params=TaglineParams,
            description="Change site settings.",
        )


async def ask(api: Api, message: str) -> dict[str, Any]:
    thread_id = await api.thread()
    answer = await api.client.post(
        f"/v1/threads/{thread_id}/runs", json={"message": message}, headers=api.auth()
    )
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


async def last_message_event(api: Api, run_id: str) -> dict[str, Any]:
    events = (await api.client.get(f"/v1/runs/{run_id}/events", headers=api.auth())).json()
    return next(e["data"] for e in reversed(events) if e["type"] == "message")


async def test_a_parked_tagline_change_does_not_claim_it_is_done(make_api: ApiFactory) -> None:
    answer = {
        "thought": "Change the tagline.",
        "actions": [{"action": "update_settings", "params": {"tagline": "Fresh bread daily"}}],
        "reply": "Tagline updated.",
    }
    api = await make_api([{"text": json.dumps(answer)}], decision_protocol="json")
    site = Settings()
    api.service.registry.register(site.spec())
    body = await ask(api, "Change the tagline to 'Fresh bread daily'")

    assert body["run"]["status"] == "waiting_approval" and site.tagline == "Just another site"
    (step,) = body["result"]["steps"]
    said = body["result"]["assistant_text"]
    assert "Tagline updated" not in said
    assert said == (
        'update_settings {"tagline": "Fresh bread daily"} needs your approval before it runs; '
        "it has not changed anything yet. Approve or reject it in Approvals "
        f"(approval {step['approval_id']})."
    )
    assert await last_message_event(api, body["run"]["id"]) == {
        "text": said,
        "final": True,
        "by": "pressloop",
    }


async def test_a_parked_plan_says_what_ran_what_waits_and_what_follows(
    make_api: ApiFactory,
) -> None:
    plan = {
        "text": "Deleting user Bob.",
        "tool_calls": [
            {"name": "remember", "arguments": {"content": "Bob leaves today."}},
            {"name": "delete_user", "arguments": {"text": "bob"}},
            {"name": "remember", "arguments": {"content": "Bob is gone."}},
        ],
    }
    api = await make_api([plan, {"text": "Bob is deleted."}])
    users = Users()
    for spec in users.specs():
        api.service.registry.register(spec)
    body = await ask(api, "Delete Bob")

    assert body["run"]["status"] == "waiting_approval" and users.deleted == []
    said = body["result"]["assistant_text"]
    assert said.startswith('delete_user {"text": "bob"} needs your approval before it runs')
    assert "Done so far: remember." in said and "After it: remember." in said
    assert "Deleting user Bob" not in said

    (approval,) = (await api.client.get("/v1/approvals", headers=api.auth())).json()
    await api.client.post(f"/v1/approvals/{approval['id']}/approve", json={}, headers=api.auth())
    done = await api.service.wait(body["run"]["id"], timeout_s=10)
    assert done.status.value == "succeeded" and users.deleted == ["bob"]
    assert done.result is not None and done.result.assistant_text == "Bob is deleted."

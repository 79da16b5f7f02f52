"""Undo over HTTP (both databases): a done step is reversed once, from its snapshot."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from pressloop.actions.registry import ActionResult, ActionServices, ActionSpec
from pressloop.contracts import ActionContext
from tests.api.conftest import ApiFactory
from tests.support.actions import action


class TitleParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    title: str


class Page:
    """A stand-in for something on the site with an undoable title."""

    def __init__(self) -> None:
        self.title = "Hello"

    async def snapshot(self, _p: TitleParams, _c: ActionContext, _s: ActionServices) -> dict:
        return {"title": self.title}

    async def set_title(
        self, p: TitleParams, _c: ActionContext, _s: ActionServices
    ) -> ActionResult:
        self.title = p.title
        return ActionResult(content={"title": p.title}, summary=f"title set to {p.title}")

    async def undo(self, snapshot: dict, _data: object, _s: ActionServices) -> ActionResult:
        self.title = snapshot["title"]
        return ActionResult(content=snapshot, summary=f"title back to {self.title}")

    def spec(self) -> ActionSpec:
        return action(
            "set_title",
            self.set_title,
            params=TitleParams,
            description="Set the title.",
            snapshot=self.snapshot,
            undo=self.undo,
        )


async def test_undo_a_step_once(make_api: ApiFactory) -> None:
    page = Page()
    api = await make_api(
        [
            {"tool_calls": [{"name": "set_title", "arguments": {"title": "Goodbye"}}]},
            {"text": "Renamed."},
        ]
    )
    api.service.registry.register(page.spec())
    thread_id = await api.thread()
    run = (
        await api.client.post(
            f"/v1/threads/{thread_id}/runs", json={"message": "rename"}, headers=api.auth()
        )
    ).json()["run"]
    assert page.title == "Goodbye"
    (entry,) = (
        await api.client.get(f"/v1/runs/{run['id']}/ledger", headers=api.auth("viewer"))
    ).json()
    assert entry["snapshot"] == {"title": "Hello"} and entry["undo_state"] is None

    viewer = await api.client.post(f"/v1/ledger/{entry['id']}/undo", headers=api.auth("viewer"))
    assert viewer.status_code == 403 and page.title == "Goodbye"
    undone = await api.client.post(f"/v1/ledger/{entry['id']}/undo", headers=api.auth())
    assert undone.status_code == 200, undone.text
    assert page.title == "Hello" and undone.json()["summary"] == "title back to Hello"
    twice = await api.client.post(f"/v1/ledger/{entry['id']}/undo", headers=api.auth())
    assert twice.status_code == 409 and "already undone" in twice.json()["error"]["message"]
    events = (await api.client.get(f"/v1/runs/{run['id']}/events", headers=api.auth())).json()
    assert events[-1]["data"]["status"] == "undone"
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    missing = await api.client.post("/v1/ledger/999999/undo", headers=api.auth())
    assert missing.status_code == 404

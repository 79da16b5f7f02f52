"""Spawned agents' reports over HTTP, on both databases (issue 14, finding 8).

A child's report comes after the parent turn that spawned it, whichever ends first (kept by the
data: the child's finish holds it while the parent run is live); a parent that waits is woken by
a `wake` run no looser than the parent run; a spawn idempotency key reused for another message
is a 422, as a run's is.
"""

from __future__ import annotations

from typing import Any

from tests.api.conftest import Api, ApiFactory
from tests.support.actions import Users, delete


def spawn(message: str, *, wait: bool = False) -> dict[str, Any]:
    return {
        "tool_calls": [{"name": "spawn_agent", "arguments": {"message": message, "wait": wait}}]
    }


async def start(api: Api, message: str, **body: Any) -> tuple[str, str]:
    """Start a run in the background; (thread id, run id)."""
    thread_id = await api.thread()
    answer = await api.client.post(
        f"/v1/threads/{thread_id}/runs",
        json={"message": message, "mode": "background", **body},
        headers=api.auth(),
    )
    assert answer.status_code == 202, answer.text
    return thread_id, answer.json()["run"]["id"]


async def detail(api: Api, thread_id: str) -> dict[str, Any]:
    return dict((await api.client.get(f"/v1/threads/{thread_id}", headers=api.auth())).json())


async def child_run(api: Api, thread_id: str) -> str:
    (child,) = (await detail(api, thread_id))["children"]
    runs = (await api.client.get(f"/v1/runs?thread_id={child['id']}", headers=api.auth())).json()
    return str(runs[0]["id"])


def contents(thread: dict[str, Any]) -> list[str]:
    return [m["content"] for m in thread["messages"] if m["role"] != "tool"]


async def test_a_report_comes_after_the_turn_that_spawned_it_even_when_the_child_ends_first(
    make_api: ApiFactory,
) -> None:
    api = await make_api(
        [
            spawn("Count the drafts"),
            {"text": "I asked a helper to count them.", "delay_s": 1},  # held at the gate
            {"text": "There are 3 drafts."},  # the child's turn, while the parent's is held
        ]
    )
    thread_id, parent_id = await start(api, "How many drafts?")
    await api.gate.reached.wait()
    child = await api.service.run_now(await child_run(api, thread_id))
    assert child is not None and child.status.value == "succeeded"
    assert (await detail(api, thread_id))["messages"] == []  # held: the parent turn is live

    api.gate.open()
    assert (await api.service.wait(parent_id, timeout_s=10)).status.value == "succeeded"
    thread = await detail(api, thread_id)
    said = contents(thread)
    assert said[:3] == ["How many drafts?", "", "I asked a helper to count them."]
    assert said[3].endswith("finished: succeeded]\nThere are 3 drafts.") and len(said) == 4
    assert thread["messages"][-1]["name"] == "spawned_agent"


async def test_a_report_waits_for_a_parent_parked_on_an_approval(make_api: ApiFactory) -> None:
    api = await make_api(
        [
            {"tool_calls": [*spawn("Check the spam")["tool_calls"], *delete("bob")["tool_calls"]]},
            {"text": "No spam."},  # the child
            {"text": "Bob is gone; a helper is checking the spam."},  # the parent, resumed
        ]
    )
    users = Users()
    for spec in users.specs():
        api.service.registry.register(spec)
    thread_id, parent_id = await start(api, "Delete bob and check the spam")
    assert (await api.service.wait(parent_id, timeout_s=10)).status.value == "waiting_approval"
    await api.service.run_now(await child_run(api, thread_id))
    assert (await detail(api, thread_id))["messages"] == []  # held while the parent waits

    (approval,) = (await api.client.get("/v1/approvals", headers=api.auth())).json()
    await api.client.post(f"/v1/approvals/{approval['id']}/approve", json={}, headers=api.auth())
    assert (await api.service.wait(parent_id, timeout_s=10)).status.value == "succeeded"
    # The resumed parent's model saw no report before its own turn.
    resumed = api.scripted.requests[-1].messages
    assert not any("spawned agent" in m.content for m in resumed)
    said = contents(await detail(api, thread_id))
    assert said[0] == "Delete bob and check the spam"
    assert said[-2] == "Bob is gone; a helper is checking the spam."
    assert said[-1].endswith("finished: succeeded]\nNo spam.")


async def test_a_waiting_parent_is_woken_by_a_wake_run_no_looser_than_its_own(
    make_api: ApiFactory,
) -> None:
    api = await make_api(
        [
            spawn("Find the spammer", wait=True),
            {"text": "A helper is looking."},
            {"text": "The spammer is bob."},  # the child
            delete("bob"),  # the woken parent tries a destructive action
            {"text": "I may not delete bob here."},
        ]
    )
    users = Users()
    for spec in users.specs():
        api.service.registry.register(spec)
    # The parent run forbids destructive actions; the run that wakes it must too.
    thread_id, parent_id = await start(api, "Deal with the spammer", policy={"destructive": "deny"})
    assert (await api.service.wait(parent_id, timeout_s=10)).status.value == "succeeded"
    await api.service.run_now(await child_run(api, thread_id))

    runs = (await api.client.get(f"/v1/runs?thread_id={thread_id}", headers=api.auth())).json()
    (wake,) = [r for r in runs if r["id"] != parent_id]
    assert wake["trigger"] == "wake" and "The spammer is bob." in wake["input"]
    woken = await api.service.run_now(wake["id"])
    assert woken is not None and woken.result is not None
    assert woken.result.steps[0].status.value == "denied" and users.deleted == []
    said = contents(await detail(api, thread_id))
    assert said.index("A helper is looking.") < said.index("I may not delete bob here.")


async def test_a_spawn_key_reused_for_another_message_is_refused(make_api: ApiFactory) -> None:
    api = await make_api([])
    thread_id = await api.thread()
    url = f"/v1/threads/{thread_id}/spawn"
    first = await api.client.post(
        url, json={"message": "Audit the plugins", "idempotency_key": "k1"}, headers=api.auth()
    )
    assert first.status_code == 201, first.text
    same = await api.client.post(
        url, json={"message": "Audit the plugins", "idempotency_key": "k1"}, headers=api.auth()
    )
    assert same.json()["thread"]["id"] == first.json()["thread"]["id"]
    other = await api.client.post(
        url, json={"message": "Delete the plugins", "idempotency_key": "k1"}, headers=api.auth()
    )
    assert other.status_code == 422, other.text
    assert "already used on this thread for another message" in other.json()["error"]["message"]
    assert len((await detail(api, thread_id))["children"]) == 1

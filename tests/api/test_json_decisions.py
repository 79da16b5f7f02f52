"""The JSON decision protocol over HTTP, on both databases (issue 14, finding 10).

One decision format everywhere: the corrective message repeats the system prompt's own
DECISION_FORMAT; the person is told the first problem the model met; plain prose that stays
prose after the corrective retry is the reply, not a failed turn.
"""

from __future__ import annotations

import json
from typing import Any

from tests.api.conftest import Api, ApiFactory


def decision(actions: int, reply: str = "") -> dict[str, Any]:
    plan = [{"action": "remember", "params": {"content": f"note {n}"}} for n in range(actions)]
    return {"text": json.dumps({"thought": "t", "actions": plan, "reply": reply})}


async def say(api: Api, message: str) -> tuple[str, dict[str, Any]]:
    thread_id = await api.thread()
    answer = await api.client.post(
        f"/v1/threads/{thread_id}/runs", json={"message": message}, headers=api.auth()
    )
    assert answer.status_code == 200, answer.text
    return thread_id, answer.json()


def decision_format(system: str) -> str:
    """The DECISION_FORMAT section of a system prompt, without its title."""
    section = system.split("## DECISION_FORMAT\n", 1)[1]
    return section.split("\n\n## ", 1)[0]


async def test_the_correction_repeats_the_prompts_format_and_the_person_sees_the_first_problem(
    make_api: ApiFactory,
) -> None:
    cut_off = {"text": '{"thought": "fewer", "actions": [{"action": "remember", "params": {'}
    api = await make_api([decision(7, "Doing all seven."), cut_off], decision_protocol="json")
    thread_id, body = await say(api, "Remember seven things")

    first, retry = api.scripted.requests
    expected = decision_format(first.system)
    correction = retry.messages[-1]
    assert correction.role.value == "user" and "asks for 7 actions" in correction.content
    assert expected in correction.content  # the very text the system prompt gave

    assert body["run"]["status"] == "failed"
    error = body["result"]["error"]["message"]
    assert "asks for 7 actions" in error.split("(the corrected answer")[0]
    assert "cut off" in error  # the retry's problem comes second, named as such
    notice = (await api.client.get(f"/v1/threads/{thread_id}", headers=api.auth())).json()
    assert "asks for 7 actions" in notice["messages"][-1]["content"]


async def test_prose_that_stays_prose_after_the_correction_is_the_reply(
    make_api: ApiFactory,
) -> None:
    prose = "Your site has three drafts; nothing needs doing."
    api = await make_api([{"text": prose}, {"text": prose}], decision_protocol="json")
    thread_id, body = await say(api, "Anything to do?")
    assert body["run"]["status"] == "succeeded"
    assert body["result"]["assistant_text"] == prose and body["result"]["steps"] == []
    assert "DECISION_FORMAT" in api.scripted.requests[1].messages[-1].content  # corrected once
    detail = (await api.client.get(f"/v1/threads/{thread_id}", headers=api.auth())).json()
    assert [(m["role"], m["content"]) for m in detail["messages"]] == [
        ("user", "Anything to do?"),
        ("assistant", prose),
    ]

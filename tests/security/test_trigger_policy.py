"""The caller cannot loosen its policy by naming a trigger: an API token asking for `chat` gets
the stricter of the chat and api policies, field by field; only the admin UI's own chat (its
session cookie and UI header) is a real chat."""

from __future__ import annotations

from typing import Any

from pressloop.contracts import Policy
from tests.api.conftest import Api, ApiFactory
from tests.security.access_helpers import sign_in, ui_cookie

WRITE_THEN_ANSWER: list[dict[str, Any]] = [
    {"tool_calls": [{"name": "remember", "arguments": {"content": "The owner likes teal."}}]},
    {"text": "done"},
]


async def set_site_policies(api: Api, policies: dict[str, dict[str, Any]]) -> None:
    changed = await api.client.patch(
        "/v1/settings", json={"policies": policies}, headers=api.auth("admin")
    )
    assert changed.status_code == 200, changed.text


async def post_run(api: Api, thread_id: str, headers: dict[str, str], **body: Any) -> Policy:
    answer = await api.client.post(
        f"/v1/threads/{thread_id}/runs", json={"message": "hi", **body}, headers=headers
    )
    assert answer.status_code == 200, answer.text
    return (await api.service.get_run(answer.json()["run"]["id"])).policy


async def test_a_token_asking_for_chat_cannot_escape_a_deny_of_the_api_policy(
    make_api: ApiFactory,
) -> None:
    api = await make_api(WRITE_THEN_ANSWER)
    await set_site_policies(api, {"api": {"write": "deny", "destructive": "deny"}})
    thread_id = await api.thread()
    answer = await api.client.post(
        f"/v1/threads/{thread_id}/runs",
        json={"message": "Remember that I like teal", "trigger": "chat"},
        headers=api.auth(),
    )
    assert answer.status_code == 200, answer.text
    run = answer.json()["run"]
    assert run["trigger"] == "chat" and run["status"] == "succeeded"
    steps = answer.json()["result"]["steps"]
    assert [(s["action"], s["status"]) for s in steps] == [("remember", "denied")]
    policy = (await api.service.get_run(run["id"])).policy
    assert (policy.write.value, policy.destructive.value) == ("deny", "deny")


async def test_the_stricter_of_both_policies_field_by_field(make_api: ApiFactory) -> None:
    api = await make_api([{"text": "ok"}] * 4)
    await set_site_policies(
        api,
        {
            "api": {"write": "confirm", "max_rounds": 3, "destructive": "allow"},
            "chat": {"write": "allow", "max_calls_per_round": 2, "destructive": "deny"},
        },
    )
    thread_id = await api.thread()
    token = api.auth()

    as_chat = await post_run(api, thread_id, token, trigger="chat")
    assert (as_chat.write.value, as_chat.destructive.value) == ("confirm", "deny")
    assert (as_chat.max_rounds, as_chat.max_calls_per_round) == (3, 2)

    # Its own trigger: the api policy as the site set it.
    as_api = await post_run(api, thread_id, token, trigger="api")
    assert (as_api.write.value, as_api.destructive.value) == ("confirm", "allow")
    assert (as_api.max_rounds, as_api.max_calls_per_round) == (3, 8)

    # A request policy still only tightens, on top of both.
    tighter = await post_run(
        api, thread_id, token, trigger="chat", policy={"max_rounds": 2, "write": "deny"}
    )
    assert (tighter.write.value, tighter.max_rounds, tighter.max_calls_per_round) == ("deny", 2, 2)


async def test_only_the_ui_chat_is_a_chat(make_api: ApiFactory) -> None:
    api = await make_api([{"text": "ok"}] * 3)
    await set_site_policies(api, {"api": {"write": "deny"}, "chat": {"max_rounds": 4}})
    thread_id = await api.thread()
    session = await sign_in(api, api.tokens["operator"])
    browser = {**ui_cookie(session), "X-Pressloop-UI": "1"}

    chat = await post_run(api, thread_id, browser, trigger="chat")
    assert (chat.write.value, chat.max_rounds) == ("allow", 4)
    # The signed-in browser naming `api` gets no looser than its chat policy either.
    api_from_ui = await post_run(api, thread_id, browser, trigger="api")
    assert (api_from_ui.write.value, api_from_ui.max_rounds) == ("deny", 4)
    # A bearer token wins over the cookie: the request is a program's, whatever else it sends.
    both = await post_run(api, thread_id, {**browser, **api.auth()}, trigger="chat")
    assert (both.write.value, both.max_rounds) == ("deny", 4)

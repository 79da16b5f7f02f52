"""Failures explained to the person, over HTTP on both databases (issue 14, finding 4).

A run that ends dead, failed or cancelled leaves Pressloop's own short message in the thread
(and its `run.finished` event); a step that fails on the run's last attempt is told to the model,
which is asked once more to explain; a dead run is not retryable in its fields.
"""

from __future__ import annotations

from typing import Any

from tests.api.conftest import Api, ApiFactory
from tests.support.down_site import down_site

FAST_RETRIES: dict[str, Any] = {
    "max_attempts": 2,
    "backoff_base_s": 0,
    "backoff_cap_s": 0,
    "worker_poll_s": 0.02,
}


def remember(content: str) -> dict[str, Any]:
    return {"name": "remember", "arguments": {"content": content}}


async def converse(api: Api, message: str) -> tuple[str, dict[str, Any]]:
    """Send `message` and wait until its run rests (a worker runs the retries)."""
    api.service.start_worker()
    thread_id = await api.thread()
    answer = await api.client.post(
        f"/v1/threads/{thread_id}/runs", json={"message": message}, headers=api.auth()
    )
    assert answer.status_code == 200, answer.text
    return thread_id, answer.json()


async def messages(api: Api, thread_id: str) -> list[dict[str, Any]]:
    detail = await api.client.get(f"/v1/threads/{thread_id}", headers=api.auth("viewer"))
    return list(detail.json()["messages"])


async def finished_event(api: Api, run_id: str) -> dict[str, Any]:
    events = (await api.client.get(f"/v1/runs/{run_id}/events", headers=api.auth())).json()
    return dict(events[-1])


async def test_a_site_that_is_down_mid_plan_is_told_to_the_model_and_to_the_person(
    make_api: ApiFactory,
) -> None:
    script = [
        {
            "text": "I will note it, list the posts, then note again.",
            "tool_calls": [
                remember("first"),
                {"name": "list_posts", "arguments": {}},
                remember("x"),
            ],
        },
        {"text": "I noted it, but the site answered 500 when I listed the posts, so I stopped."},
    ]
    async with down_site() as site:
        api = await make_api(
            script,
            wp_url=site.url,
            wp_user="admin",
            wp_app_password="abcd efgh ijkl mnop",
            wp_retries=0,
            **FAST_RETRIES,
        )
        thread_id, body = await converse(api, "Note it and check the posts")
    run, result = body["run"], body["result"]
    assert run["status"] == "dead" and run["attempt"] == 2
    # Dead is final: nothing in its fields asks for a retry.
    assert run["error"]["retryable"] is False and result["error"]["retryable"] is False
    assert result["next_action"] == "stop"
    assert [s["status"] for s in result["steps"]] == ["succeeded", "failed", "skipped"]

    # The model got the failure as the step's result and was asked once more, to explain.
    told = api.scripted.requests[-1].messages
    assert any(m.role.value == "tool" and "500" in m.content for m in told), told
    assert api.scripted.remaining == 0

    thread = await messages(api, thread_id)
    explained, notice = thread[-2], thread[-1]
    assert explained["content"].startswith("I noted it, but the site answered 500")
    assert notice["role"] == "assistant" and notice["name"] == "pressloop"
    assert notice["content"] == (
        "The site did not answer (HTTP 500) after 2 attempts; check the site, then requeue "
        "this run."
    )
    finished = await finished_event(api, run["id"])
    assert finished["type"] == "run.finished" and finished["data"]["notice"] == notice["content"]


async def test_a_model_that_fails_is_explained_by_pressloop_alone(make_api: ApiFactory) -> None:
    failure = {"error": {"status": 500, "message": "the model is down"}}
    api = await make_api([failure, failure], **FAST_RETRIES)
    thread_id, body = await converse(api, "hello")
    run = body["run"]
    assert run["status"] == "dead" and run["error"]["retryable"] is False
    assert body["result"]["next_action"] == "stop"
    assert len(api.scripted.requests) == 2  # no third call: the model is what failed
    hello, notice = await messages(api, thread_id)
    assert hello["content"] == "hello" and notice["name"] == "pressloop"
    assert notice["content"] == (
        "The model provider did not answer (HTTP 500) after 2 attempts; check the provider, "
        "then requeue this run."
    )


async def test_a_failed_run_says_why_and_what_to_do(make_api: ApiFactory) -> None:
    api = await make_api([{"tool_calls": [remember("a")]}, {"tool_calls": [remember("b")]}])
    thread_id = await api.thread()
    answer = await api.client.post(
        f"/v1/threads/{thread_id}/runs",
        json={"message": "remember twice", "policy": {"max_rounds": 1}},
        headers=api.auth(),
    )
    body = answer.json()
    assert body["run"]["status"] == "failed"
    notice = (await messages(api, thread_id))[-1]
    assert notice["name"] == "pressloop"
    assert notice["content"] == (
        "The run stopped at a limit: the turn reached its limit of 1 rounds; ask for less at "
        "once, or raise the limit."
    )


async def test_a_cancelled_run_says_so_in_its_thread(make_api: ApiFactory) -> None:
    api = await make_api([])
    thread_id = await api.thread()
    queued = await api.service.submit(thread_id, "later, please")  # not started: no worker
    cancelled = await api.client.post(f"/v1/runs/{queued.run.id}/cancel", headers=api.auth())
    assert cancelled.json()["status"] == "cancelled"
    asked, notice = await messages(api, thread_id)
    assert asked["content"] == "later, please" and notice["name"] == "pressloop"
    assert notice["content"] == "This run was cancelled before it started; nothing was done."

"""Posting messages and controlling runs over HTTP, on both databases (in-process transport)."""

from __future__ import annotations

import asyncio

from tests.api.conftest import ApiFactory


async def test_wait_mode_answers_with_the_finished_run_and_its_result(
    make_api: ApiFactory,
) -> None:
    api = await make_api()
    thread_id = await api.thread()

    response = await api.client.post(
        f"/v1/threads/{thread_id}/runs",
        json={"message": "Remember that I like teal"},
        headers=api.auth(),
    )

    assert response.status_code == 200, response.text
    body = response.json()
    run, result = body["run"], body["result"]
    assert run["status"] == "succeeded" and run["thread_id"] == thread_id
    assert run["requesting_user"] == "operator-user" and run["trigger"] == "api"
    assert run["finished_at"].startswith("2026-01-05T12:00:00")
    assert result["status"] == "succeeded"
    assert result["assistant_text"] == "Noted: you like teal."
    assert [(s["action"], s["status"]) for s in result["steps"]] == [("remember", "succeeded")]
    assert result["usage"]["model_calls"] == 2 and result["usage"]["action_calls"] == 1
    assert "checkpoint" not in run

    detail = (await api.client.get(f"/v1/threads/{thread_id}", headers=api.auth("viewer"))).json()
    assert [m["role"] for m in detail["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert detail["messages"][0]["content"] == "Remember that I like teal"
    assert [r["id"] for r in detail["runs"]] == [run["id"]]
    assert detail["thread"]["id"] == thread_id and detail["children"] == []


async def test_a_failed_run_is_still_a_200_with_its_error(make_api: ApiFactory) -> None:
    api = await make_api([{"error": {"status": 400, "message": "bad request"}}])
    thread_id = await api.thread()
    response = await api.client.post(
        f"/v1/threads/{thread_id}/runs", json={"message": "hi"}, headers=api.auth()
    )
    assert response.status_code == 200
    body = response.json()
    assert body["run"]["status"] == "failed"
    assert body["result"]["error"]["cls"] == "ProviderError"
    assert "400" in body["result"]["error"]["message"]


async def test_background_mode_answers_202_at_once_and_the_run_finishes(
    make_api: ApiFactory,
) -> None:
    api = await make_api([{"text": "later", "delay_s": 1}])
    thread_id = await api.thread()
    response = await api.client.post(
        f"/v1/threads/{thread_id}/runs",
        json={"message": "hi", "mode": "background"},
        headers=api.auth(),
    )
    assert response.status_code == 202
    run_id = response.json()["run"]["id"]
    assert set(response.json()) == {"run"}
    # The model is still answering (held at the gate): the run is running, not finished.
    await api.gate.reached.wait()
    shown = (await api.client.get(f"/v1/runs/{run_id}", headers=api.auth("viewer"))).json()
    assert shown["status"] == "running"
    api.gate.open()
    await api.service.wait(run_id)
    shown = (await api.client.get(f"/v1/runs/{run_id}", headers=api.auth("viewer"))).json()
    assert shown["status"] == "succeeded" and shown["result"]["assistant_text"] == "later"


async def test_the_same_idempotency_key_gives_the_same_run_and_one_model_call(
    make_api: ApiFactory,
) -> None:
    api = await make_api([{"text": "once"}])
    thread_id = await api.thread()
    url = f"/v1/threads/{thread_id}/runs"

    first = await api.client.post(
        url, json={"message": "hi", "idempotency_key": "k-1"}, headers=api.auth()
    )
    # The same key as a header, a second time: the same run, not a second one.
    again = await api.client.post(
        url, json={"message": "hi"}, headers={**api.auth(), "Idempotency-Key": "k-1"}
    )
    background = await api.client.post(
        url,
        json={"message": "hi", "mode": "background", "idempotency_key": "k-1"},
        headers=api.auth(),
    )

    assert first.status_code == again.status_code == 200
    assert background.status_code == 202
    ids = {r.json()["run"]["id"] for r in (first, again, background)}
    assert len(ids) == 1
    assert again.json()["result"]["assistant_text"] == "once"
    assert "idempotent-replayed" not in first.headers
    assert again.headers["idempotent-replayed"] == "true"
    assert len(api.scripted.requests) == 1
    runs = (await api.client.get(f"/v1/runs?thread_id={thread_id}", headers=api.auth())).json()
    assert len(runs) == 1


async def test_concurrent_requests_with_one_key_share_one_run(make_api: ApiFactory) -> None:
    api = await make_api([{"text": "once", "delay_s": 1}])
    thread_id = await api.thread()

    async def post() -> str:
        response = await api.client.post(
            f"/v1/threads/{thread_id}/runs",
            json={"message": "hi"},
            headers={**api.auth(), "Idempotency-Key": "same"},
        )
        assert response.status_code == 200, response.text
        return str(response.json()["run"]["id"])

    both = asyncio.gather(post(), post())
    await api.gate.reached.wait()
    api.gate.open()
    first, second = await both
    assert first == second
    assert len(api.scripted.requests) == 1


async def test_an_idempotency_key_reused_for_another_message_is_refused(
    make_api: ApiFactory,
) -> None:
    api = await make_api([{"text": "once"}])
    thread_id = await api.thread()
    url = f"/v1/threads/{thread_id}/runs"
    headers = {**api.auth(), "Idempotency-Key": "k"}
    assert (await api.client.post(url, json={"message": "one"}, headers=headers)).is_success
    other = await api.client.post(url, json={"message": "two"}, headers=headers)
    assert other.status_code == 422
    assert "already used" in other.json()["error"]["message"]
    differ = await api.client.post(
        url, json={"message": "one", "idempotency_key": "other"}, headers=headers
    )
    assert differ.status_code == 422
    assert len(api.scripted.requests) == 1


async def test_multitask_reject_on_a_busy_thread_is_409(make_api: ApiFactory) -> None:
    api = await make_api([{"text": "queued answer"}])
    thread_id = await api.thread()
    busy = (await api.service.submit(thread_id, "first")).run
    claim = await api.service.runner.claimer.claim(busy.id)
    assert claim is not None

    rejected = await api.client.post(
        f"/v1/threads/{thread_id}/runs",
        json={"message": "second", "multitask": "reject"},
        headers=api.auth(),
    )
    assert rejected.status_code == 409
    error = rejected.json()["error"]
    assert error["code"] == "conflict" and busy.id in error["message"]

    # enqueue (the default) queues behind the busy run instead.
    queued = await api.client.post(
        f"/v1/threads/{thread_id}/runs",
        json={"message": "second", "mode": "background"},
        headers=api.auth(),
    )
    assert queued.status_code == 202 and queued.json()["run"]["status"] == "queued"
    runs = (await api.client.get(f"/v1/runs?thread_id={thread_id}", headers=api.auth())).json()
    assert len(runs) == 2


async def test_cancel_a_queued_run_and_requeue_a_failed_one(make_api: ApiFactory) -> None:
    api = await make_api([{"error": {"status": 400, "message": "no"}}, {"text": "second try"}])
    thread_id = await api.thread()
    url = f"/v1/threads/{thread_id}/runs"
    failed = (await api.client.post(url, json={"message": "hi"}, headers=api.auth())).json()
    run_id = failed["run"]["id"]
    assert failed["run"]["status"] == "failed"

    refused = await api.client.post(f"/v1/runs/{run_id}/requeue", headers=api.auth("viewer"))
    assert refused.status_code == 403
    requeued = await api.client.post(f"/v1/runs/{run_id}/requeue", headers=api.auth())
    assert requeued.status_code == 200 and requeued.json()["status"] == "queued"
    done = await api.service.wait(run_id)
    assert done.result is not None and done.result.assistant_text == "second try"
    again = await api.client.post(f"/v1/runs/{run_id}/requeue", headers=api.auth())
    assert again.status_code == 409 and "succeeded" in again.json()["error"]["message"]

    # A run queued behind a busy thread is cancelled at once.
    busy = (await api.service.submit(thread_id, "busy")).run
    assert await api.service.runner.claimer.claim(busy.id) is not None
    queued = (await api.service.submit(thread_id, "waiting")).run
    cancelled = await api.client.post(f"/v1/runs/{queued.id}/cancel", headers=api.auth())
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    # A running one is asked to stop at its next safe point.
    asked = await api.client.post(f"/v1/runs/{busy.id}/cancel", headers=api.auth())
    assert asked.status_code == 200 and asked.json()["status"] == "running"


async def test_list_runs_filters_and_events_as_json(make_api: ApiFactory) -> None:
    api = await make_api([{"text": "a"}, {"error": {"status": 400, "message": "x"}}])
    first_thread, second_thread = await api.thread(), await api.thread()
    for thread_id in (first_thread, second_thread):
        await api.client.post(
            f"/v1/threads/{thread_id}/runs", json={"message": "go"}, headers=api.auth()
        )
    viewer = api.auth("viewer")

    all_runs = (await api.client.get("/v1/runs", headers=viewer)).json()
    assert {r["thread_id"] for r in all_runs} == {first_thread, second_thread}
    failed = (await api.client.get("/v1/runs?status=failed", headers=viewer)).json()
    assert [r["thread_id"] for r in failed] == [second_thread]
    one = (await api.client.get(f"/v1/runs?thread_id={first_thread}", headers=viewer)).json()
    assert [r["status"] for r in one] == ["succeeded"]
    limited = (await api.client.get("/v1/runs?limit=1", headers=viewer)).json()
    assert len(limited) == 1
    bad = await api.client.get("/v1/runs?status=sleeping", headers=viewer)
    assert bad.status_code == 422

    run_id = one[0]["id"]
    events = (await api.client.get(f"/v1/runs/{run_id}/events", headers=viewer)).json()
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert events[0]["type"] == "run.started" and events[-1]["type"] == "run.finished"
    later = (await api.client.get(f"/v1/runs/{run_id}/events?after=2", headers=viewer)).json()
    assert later == events[2:]


async def test_a_request_policy_only_tightens(make_api: ApiFactory) -> None:
    api = await make_api([{"text": "ok"}])
    thread_id = await api.thread()
    response = await api.client.post(
        f"/v1/threads/{thread_id}/runs",
        json={"message": "hi", "policy": {"max_rounds": 2, "write": "deny"}},
        headers=api.auth(),
    )
    assert response.status_code == 200
    run = await api.service.get_run(response.json()["run"]["id"])
    assert run.policy.max_rounds == 2 and run.policy.write.value == "deny"
    bad = await api.client.post(
        f"/v1/threads/{thread_id}/runs",
        json={"message": "hi", "policy": {"max_rounds": "many"}},
        headers=api.auth(),
    )
    assert bad.status_code == 422 and "policy.max_rounds" in bad.json()["error"]["message"]

"""Which process runs a background run posted to the API (docs/operations.md, "Which process
runs a run"): the API process itself, at once, unless it is told to run no turn."""

from __future__ import annotations

from tests.api.conftest import ApiFactory


async def test_a_background_run_starts_in_the_process_that_received_it(
    make_api: ApiFactory,
) -> None:
    api = await make_api([{"text": "Done in the background."}])  # no worker in this process
    thread = await api.thread()
    posted = await api.client.post(
        f"/v1/threads/{thread}/runs",
        json={"message": "later is fine", "mode": "background"},
        headers=api.auth(),
    )
    assert posted.status_code == 202
    run_id = posted.json()["run"]["id"]
    done = await api.service.wait(run_id, timeout_s=10)
    assert done.status.value == "succeeded"
    events = await api.service.events(run_id)
    assert events[0].data["worker"] == api.service.runner.owner


async def test_a_process_that_runs_no_turn_leaves_it_queued_for_the_workers(
    make_api: ApiFactory,
) -> None:
    api = await make_api([{"text": "Done by a worker."}])
    api.service.runs_turns = False  # what `pressloop serve` does with PRESSLOOP_SERVE_RUNS=0
    thread = await api.thread()
    posted = await api.client.post(
        f"/v1/threads/{thread}/runs",
        json={"message": "later is fine", "mode": "background"},
        headers=api.auth(),
    )
    run_id = posted.json()["run"]["id"]
    assert posted.status_code == 202 and posted.json()["run"]["status"] == "queued"
    assert run_id not in api.service.runner.sessions
    assert (await api.service.get_run(run_id)).status.value == "queued"

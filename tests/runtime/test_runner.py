"""The runner over both databases: a whole turn stored, events numbered, leases enforced."""

from __future__ import annotations

from pressloop.contracts import EventType, Role, RunStatus, TurnStatus
from pressloop.runtime.service import Service
from pressloop.store import claims as claim_store
from pressloop.store import usage as usage_store
from tests.runtime.conftest import ServiceFactory

REMEMBER_THEN_ANSWER = [
    {"tool_calls": [{"name": "remember", "arguments": {"content": "The owner likes teal."}}]},
    {"tool_calls": [{"name": "recall", "arguments": {"query": "teal"}}]},
    {"text": "Noted: you like teal."},
]


async def test_a_turn_stores_messages_events_usage_and_result(make_service: ServiceFactory) -> None:
    service: Service = await make_service(REMEMBER_THEN_ANSWER)
    thread = await service.create_thread(title="colours", created_by="alice")
    submitted = await service.submit(thread.id, "Remember that I like teal", user="alice")
    run = await service.run_now(submitted.run.id)

    assert run is not None
    assert run.status is RunStatus.SUCCEEDED
    assert run.result is not None and run.result.status is TurnStatus.SUCCEEDED
    assert run.result.assistant_text == "Noted: you like teal."
    assert [s.action for s in run.result.steps] == ["remember", "recall"]
    assert run.usage.model_calls == 3 and run.usage.action_calls == 2
    assert run.lease_owner is None

    detail = await service.thread_detail(thread.id)
    roles = [m.role for m in detail["messages"]]
    assert roles == [
        Role.USER,
        Role.ASSISTANT,
        Role.TOOL,
        Role.ASSISTANT,
        Role.TOOL,
        Role.ASSISTANT,
    ]
    assert "teal" in detail["messages"][4].content

    events = await service.events(run.id)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    types = [e.type for e in events]
    assert types[0] is EventType.RUN_STARTED and types[-1] is EventType.RUN_FINISHED
    assert types.count(EventType.ACTION) == 2 and types.count(EventType.TOKENS) == 3
    assert events[-1].data["status"] == "succeeded"

    async with service.database.read() as conn:
        rows = await usage_store.list_usage(conn, since_day="2000-01-01", scope="user")
    assert rows[0]["subject"] == "alice" and rows[0]["model_calls"] == 3 and rows[0]["runs"] == 1


async def test_two_runners_never_run_one_thread_at_once(make_service: ServiceFactory) -> None:
    service: Service = await make_service([{"text": "one"}, {"text": "two"}])
    thread = await service.create_thread()
    first = (await service.submit(thread.id, "first")).run
    second = (await service.submit(thread.id, "second")).run

    claim = await service.runner.claimer.claim(first.id)
    assert claim is not None
    # The second run of the busy thread is not claimable, by any runner.
    assert await service.runner.claimer.claim(second.id) is None
    assert await service.runner.claimer.claim() is None

    # Even a direct write that bypasses the claim query is refused by the database itself.
    import sqlalchemy as sa
    from sqlalchemy.exc import IntegrityError

    from pressloop.store.schema import runs

    try:
        async with service.database.write() as conn:
            await conn.execute(
                sa.update(runs).where(runs.c.id == second.id).values(status="running")
            )
        raise AssertionError("the database accepted two running runs on one thread")
    except IntegrityError:
        pass

    finished = await service.runner.run_claim(claim)
    assert finished is not None and finished.status is RunStatus.SUCCEEDED
    later = await service.run_now(second.id)
    assert later is not None and later.status is RunStatus.SUCCEEDED
    assert later.result is not None and later.result.assistant_text == "two"


async def test_a_stale_lease_cannot_write(make_service: ServiceFactory, clock) -> None:
    # The stale holder may still reach the model before its first write fails.
    service: Service = await make_service([{"text": "late"}] * 2, lease_ttl_s=5)
    thread = await service.create_thread()
    run = (await service.submit(thread.id, "hello")).run
    stale = await service.runner.claimer.claim(run.id)
    assert stale is not None
    clock.advance(10)
    async with service.database.write() as conn:
        assert await claim_store.reclaim_expired(conn, now=clock()) == [run.id]
    fresh = await service.runner.claimer.claim(run.id)
    assert fresh is not None and fresh.token == stale.token + 1
    # The old holder's run ends without writing anything.
    assert await service.runner.run_claim(stale) is None
    assert await service.events(run.id) == []
    done = await service.runner.run_claim(fresh)
    assert done is not None and done.status is RunStatus.SUCCEEDED

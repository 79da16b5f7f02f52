"""Approvals on both databases: a destructive step pauses the run until a person decides."""

from __future__ import annotations

import pytest

from pressloop.contracts import RunStatus, StepStatus, Trigger
from pressloop.errors import Conflict
from pressloop.runtime.heartbeat_runs import Scheduler
from pressloop.runtime.heartbeat_schedules import Schedules
from pressloop.runtime.service import Service
from tests.conftest import FakeClock
from tests.runtime.conftest import ServiceFactory
from tests.support.actions import Users, delete


async def service_with(make_service: ServiceFactory, script: list[dict], **settings) -> tuple:
    users = Users()
    service: Service = await make_service(script, **settings)
    for spec in users.specs():
        service.registry.register(spec)
    return service, users


async def start(service: Service, message: str, trigger: Trigger = Trigger.CHAT):
    thread = await service.create_thread()
    run = (await service.submit(thread.id, message, trigger=trigger)).run
    return thread.id, await service.run_now(run.id)


async def test_approve_runs_the_step_and_the_loop_goes_on(make_service: ServiceFactory) -> None:
    service, users = await service_with(make_service, [delete("bob"), {"text": "Bob is gone."}])
    thread_id, paused = await start(service, "delete user bob")
    assert paused is not None and paused.status is RunStatus.WAITING_APPROVAL
    assert users.deleted == []  # nothing happens before a person decides
    (approval,) = await service.approvals.find(status="pending")
    assert approval.action == "delete_user" and approval.risk == "destructive"
    assert approval.preview == {"before": {"user": "bob", "exists": True}, "after": None}
    assert approval.trigger == "chat" and approval.run_id == paused.id
    # The thread is busy meanwhile: a new message waits behind the paused run.
    later = (await service.submit(thread_id, "anything else?")).run
    assert await service.run_now(later.id) is None

    await service.decide(approval.id, approve=True, by="alice", note="ok")
    done = await service.run_now(paused.id)
    assert done is not None and done.status is RunStatus.SUCCEEDED
    assert users.deleted == ["bob"] and done.result is not None
    assert done.result.assistant_text == "Bob is gone."
    step = done.result.steps[-1]
    assert step.status is StepStatus.SUCCEEDED and step.approval_id == approval.id
    with pytest.raises(Conflict, match="already approved"):
        await service.decide(approval.id, approve=False, by="mallory")


async def test_reject_tells_the_model_and_changes_nothing(make_service: ServiceFactory) -> None:
    service, users = await service_with(
        make_service, [delete("bob"), {"text": "Understood, Bob stays."}]
    )
    _thread, paused = await start(service, "delete user bob")
    (approval,) = await service.approvals.find(status="pending")
    await service.decide(approval.id, approve=False, by="alice", note="Bob is our editor")
    done = await service.run_now(paused.id)
    assert done is not None and done.status is RunStatus.SUCCEEDED
    assert users.deleted == [] and "bob" in users.users
    told = service.scripted.requests[-1].messages[-1].content  # type: ignore[attr-defined]
    assert "rejected" in told and "Bob is our editor" in told


async def test_an_expired_approval_is_a_reject_and_frees_the_thread(
    make_service: ServiceFactory, clock: FakeClock
) -> None:
    service, users = await service_with(
        make_service,
        [delete("bob"), {"text": "Nobody answered."}, {"text": "Hi again."}],
        approval_expiry_s=60,
    )
    thread_id, paused = await start(service, "delete user bob")
    clock.advance(61)
    (expired,) = await service.approvals.expire_due()
    assert expired.status == "expired"
    done = await service.run_now(paused.id)
    assert done is not None and done.status is RunStatus.SUCCEEDED and users.deleted == []
    assert done.result is not None and done.result.steps[-1].status is StepStatus.REJECTED
    again = await service.run_now((await service.submit(thread_id, "hello")).run.id)
    assert again is not None and again.status is RunStatus.SUCCEEDED


async def test_approve_with_edited_params(make_service: ServiceFactory) -> None:
    service, users = await service_with(make_service, [delete("bob"), {"text": "Done."}])
    _thread, paused = await start(service, "delete user bob")
    (approval,) = await service.approvals.find(status="pending")
    await service.decide(approval.id, approve=True, by="alice", params={"text": "carol"})
    done = await service.run_now(paused.id)
    assert done is not None and users.deleted == ["carol"]


async def test_a_plan_resumes_at_the_next_step_after_approval(
    make_service: ServiceFactory,
) -> None:
    plan = {
        "tool_calls": [
            {"name": "recall", "arguments": {}},
            {"name": "delete_user", "arguments": {"text": "bob"}},
            {"name": "remember", "arguments": {"content": "bob was removed"}},
        ]
    }
    service, users = await service_with(make_service, [plan, {"text": "All three done."}])
    _thread, paused = await start(service, "clean up")
    assert paused is not None and paused.status is RunStatus.WAITING_APPROVAL
    (approval,) = await service.approvals.find(status="pending")
    await service.decide(approval.id, approve=True, by="alice")
    done = await service.run_now(paused.id)
    assert done is not None and done.result is not None
    assert [s.action for s in done.result.steps] == ["recall", "delete_user", "remember"]
    assert [s.status for s in done.result.steps] == [StepStatus.SUCCEEDED] * 3
    assert users.deleted == ["bob"]


async def test_a_heartbeat_queues_destructive_steps_for_approval(
    make_service: ServiceFactory, clock: FakeClock
) -> None:
    service, users = await service_with(make_service, [delete("bob"), {"text": "Asked."}])
    await Schedules(service.database, service.now).create(kind="interval", interval_s=60)
    clock.advance(60)
    scheduler = Scheduler(database=service.database, now=service.now, max_attempts=3, poll_s=1)
    (run_id,) = await scheduler.tick()
    paused = await service.run_now(run_id)
    assert paused is not None and paused.status is RunStatus.WAITING_APPROVAL
    (approval,) = await service.approvals.find(status="pending")
    assert approval.trigger == "heartbeat" and users.deleted == []


async def test_untrusted_content_forces_approval_even_where_policy_allows(
    make_service: ServiceFactory,
) -> None:
    service, users = await service_with(
        make_service,
        [
            {"tool_calls": [{"name": "read_comment", "arguments": {"text": "c1"}}]},
            delete("bob"),
            {"text": "Waiting."},
        ],
    )
    thread = await service.create_thread()
    run = (await service.submit(thread.id, "handle comments", policy={"destructive": "allow"})).run
    assert run.policy.destructive.value == "confirm"  # a request can only tighten...
    # ...so allow it at the thread level (an admin's choice) to show the guard still holds.
    import sqlalchemy as sa

    from pressloop.store.schema import runs

    async with service.database.write() as conn:
        policy = {**run.policy.model_dump(mode="json"), "destructive": "allow"}
        await conn.execute(sa.update(runs).where(runs.c.id == run.id).values(policy=policy))
    paused = await service.run_now(run.id)
    assert paused is not None and paused.status is RunStatus.WAITING_APPROVAL
    assert users.deleted == []

"""Queueing a run (`runtime/enqueue.py`) on both databases: the policy's layers, idempotency keys,
the thread's activity, and a run for another agent than the thread's."""

from __future__ import annotations

from pressloop.contracts import Multitask, PolicyMode, RunStatus, Trigger
from pressloop.runtime.enqueue import RunRequest, enqueue_run
from pressloop.store import agents as agent_store
from pressloop.store import threads as thread_store
from pressloop.store.db import Database
from tests.conftest import FakeClock


async def test_a_run_gets_its_layers_and_a_key_gives_back_its_run(
    database: Database, clock: FakeClock
) -> None:
    async with database.write() as conn:
        await agent_store.ensure_agent(conn, now=clock())
        thread = await thread_store.create_thread(
            conn,
            agent_id=agent_store.DEFAULT_AGENT_ID,
            now=clock(),
            metadata={"policy": {"write": "confirm"}},
        )
    clock.advance(5)
    request = RunRequest(
        trigger=Trigger.CHAT,
        message="hello",
        requesting_user="ana",
        execution_user="ana",
        policy={"max_rounds": 3, "destructive": "allow"},  # a request only tightens
        idempotency_key="k1",
        multitask=Multitask.REJECT,
    )
    async with database.write() as conn:
        first, created = await enqueue_run(conn, thread, request, now=clock(), max_attempts=3)
    assert created
    assert first.status is RunStatus.QUEUED and first.input == "hello"
    assert first.requesting_user == first.execution_user == "ana"
    assert first.multitask == "reject" and first.max_attempts == 3
    assert first.policy.max_rounds == 3
    assert first.policy.write is PolicyMode.CONFIRM  # the thread's layer
    assert first.policy.destructive is PolicyMode.CONFIRM  # not loosened by the request
    async with database.read() as conn:
        touched = await thread_store.get_thread(conn, thread.id)
    assert touched is not None and touched.updated_at == clock()

    clock.advance(5)
    async with database.write() as conn:
        again, created = await enqueue_run(conn, thread, request, now=clock(), max_attempts=3)
        untouched = await thread_store.get_thread(conn, thread.id)
    assert not created and again.id == first.id
    assert untouched is not None and untouched.updated_at == touched.updated_at


async def test_a_run_may_name_another_agent_than_its_threads(
    database: Database, clock: FakeClock
) -> None:
    async with database.write() as conn:
        await agent_store.ensure_agent(conn, now=clock())
        await agent_store.ensure_agent(conn, now=clock(), agent_id="writer", name="Writer")
        thread = await thread_store.create_thread(conn, agent_id="writer", now=clock())
        default = RunRequest(trigger=Trigger.HEARTBEAT, message="beat")
        own, _ = await enqueue_run(conn, thread, default, now=clock(), max_attempts=1)
        named = RunRequest(
            trigger=Trigger.HEARTBEAT, message="beat", agent_id=agent_store.DEFAULT_AGENT_ID
        )
        other, _ = await enqueue_run(conn, thread, named, now=clock(), max_attempts=1)
    assert own.agent_id == "writer"
    assert other.agent_id == agent_store.DEFAULT_AGENT_ID
    assert other.thread_id == own.thread_id == thread.id
    assert own.policy.max_rounds == 4  # the heartbeat profile

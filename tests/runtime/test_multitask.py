"""A message to a busy thread: reject, enqueue or interrupt (on both databases)."""

from __future__ import annotations

import asyncio

import pytest

from pressloop.contracts import Multitask, Role, RunStatus
from pressloop.errors import Conflict
from pressloop.runtime.service import Service
from tests.runtime.conftest import ServiceFactory
from tests.support.actions import Gate


async def busy_thread(service: Service) -> tuple[str, str]:
    thread = await service.create_thread()
    first = (await service.submit(thread.id, "first")).run
    assert await service.runner.claimer.claim(first.id) is not None
    return thread.id, first.id


async def test_reject_refuses_a_message_to_a_busy_thread(make_service: ServiceFactory) -> None:
    service: Service = await make_service([])
    thread_id, first_id = await busy_thread(service)
    with pytest.raises(Conflict, match=first_id):
        await service.submit(thread_id, "second", multitask=Multitask.REJECT)


async def test_enqueue_runs_messages_in_order(make_service: ServiceFactory) -> None:
    service: Service = await make_service([{"text": "one"}, {"text": "two"}])
    thread = await service.create_thread()
    first = (await service.submit(thread.id, "first")).run
    second = (await service.submit(thread.id, "second", multitask=Multitask.ENQUEUE)).run
    # The later message waits for the earlier one, even if asked for first.
    assert await service.run_now(second.id) is None
    assert (await service.run_now(first.id)).status is RunStatus.SUCCEEDED  # type: ignore[union-attr]
    done = await service.run_now(second.id)
    assert done is not None and done.result is not None and done.result.assistant_text == "two"
    contents = [m.content for m in (await service.thread_detail(thread.id))["messages"]]
    assert contents == ["first", "one", "second", "two"]


async def test_interrupt_cancels_at_a_safe_point_and_keeps_the_transcript_valid(
    make_service: ServiceFactory,
) -> None:
    gate = Gate()
    service: Service = await make_service(
        [
            {
                "tool_calls": [
                    {"name": "slow", "arguments": {"text": "x"}},
                    {"name": "slow", "arguments": {"text": "y"}},
                ]
            },
            {"text": "Now the new question."},
        ]
    )
    service.registry.register(gate.spec())
    thread = await service.create_thread()
    first = (await service.submit(thread.id, "long job")).run
    running = asyncio.create_task(service.run_now(first.id))
    await asyncio.wait_for(gate.entered.wait(), 10)

    second = (
        await service.submit(thread.id, "stop, new question", multitask=Multitask.INTERRUPT)
    ).run
    gate.release.set()
    interrupted = await asyncio.wait_for(running, 10)
    assert interrupted is not None and interrupted.status is RunStatus.CANCELLED
    assert service.scripted.remaining == 1  # type: ignore[attr-defined]

    answered = await service.run_now(second.id)
    assert answered is not None and answered.status is RunStatus.SUCCEEDED
    messages = (await service.thread_detail(thread.id))["messages"]
    calls = [c.id for m in messages if m.role is Role.ASSISTANT for c in m.tool_calls]
    results = [m.tool_call_id for m in messages if m.role is Role.TOOL]
    assert len(calls) == 2 and sorted(calls) == sorted(results)
    # The model's next request carried a result for every call (providers reject anything else).
    last_request = service.scripted.requests[-1].messages  # type: ignore[attr-defined]
    assert sum(1 for m in last_request if m.role is Role.TOOL) == 2

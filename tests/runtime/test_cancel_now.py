"""Cancel stops a run now, whatever is in flight (DESIGN.md section 8), on both databases.

The model call or the action in flight is cancelled, a write cut short is reconciled through the
ledger (found: it succeeded; not found: it did not happen), every tool call gets a result, the
run ends `cancelled`, and a message sent with `multitask: interrupt` starts at once.
"""

from __future__ import annotations

import asyncio
import time

from pressloop.actions.registry import ActionResult, ActionServices
from pressloop.contracts import (
    ActionContext,
    EventType,
    Message,
    Multitask,
    Risk,
    Role,
    RunStatus,
    StepStatus,
)
from pressloop.providers.scripted import ScriptedProvider
from pressloop.runtime.service import Service
from pressloop.store import ledger as ledger_store
from tests.runtime.conftest import ServiceFactory
from tests.support.actions import Effects, NoteParams, action


class Held:
    """Where a test holds the run: `reached` once it is there; it never goes on by itself."""

    def __init__(self) -> None:
        self.reached = asyncio.Event()

    async def hold(self, _seconds: float = 0) -> None:
        self.reached.set()
        await asyncio.Event().wait()


class Site(Effects):
    """The outside world a write changes; `touch` holds before or after its effect."""

    def __init__(self, *, effect_first: bool) -> None:
        super().__init__()
        self.effect_first = effect_first
        self.held = Held()

    async def touch(self, p: NoteParams, c: ActionContext, _s: ActionServices) -> ActionResult:
        if self.effect_first:
            self.effects.append(self.key(p, c))
        await self.held.hold()  # the request is on its way; the answer never comes
        self.effects.append(self.key(p, c))
        return ActionResult(content="touched", summary="touched")


async def slow_model(service: Service, script: list[dict[str, object]]) -> Held:
    """The service's model answers `script`, holding on every item with `delay_s`."""
    held = Held()
    provider = ScriptedProvider(script, sleep=held.hold)
    service.runner.provider = lambda: provider
    service.scripted = provider  # type: ignore[attr-defined]
    return held


def every_call_answered(messages: list[Message]) -> bool:
    calls = [c.id for m in messages for c in m.tool_calls]
    results = [m.tool_call_id or "" for m in messages if m.role is Role.TOOL]
    return bool(calls) and sorted(calls) == sorted(results)


async def test_cancel_during_a_slow_model_answer_ends_the_run_cancelled_at_once(
    make_service: ServiceFactory,
) -> None:
    service: Service = await make_service([])
    held = await slow_model(service, [{"text": "too late", "delay_s": 60}])
    thread = await service.create_thread()
    submission = await service.submit(thread.id, "take your time", start_here=True)
    await asyncio.wait_for(held.reached.wait(), 10)

    started = time.monotonic()
    answer = await service.cancel(submission.run.id)
    took = time.monotonic() - started
    assert answer.status is RunStatus.CANCELLED  # the answer waited for it to stop
    assert took < 5, took
    assert submission.started is not None
    done = await asyncio.wait_for(submission.started, 10)
    assert done is not None and done.status is RunStatus.CANCELLED
    events = await service.events(submission.run.id)
    assert events[-1].type is EventType.RUN_FINISHED and events[-1].data["status"] == "cancelled"
    messages = (await service.thread_detail(thread.id))["messages"]
    assert messages[0].content == "take your time"
    assert not any(m.role is Role.ASSISTANT and m.content == "too late" for m in messages)


async def test_a_write_cut_short_after_its_effect_is_reconciled_as_done(
    make_service: ServiceFactory,
) -> None:
    site = Site(effect_first=True)
    service: Service = await make_service(
        [{"tool_calls": [{"name": "touch", "arguments": {"text": "a"}}]}, {"text": "Next."}]
    )
    service.registry.register(site.spec())
    thread = await service.create_thread()
    submission = await service.submit(thread.id, "touch it", start_here=True)
    await asyncio.wait_for(site.held.reached.wait(), 10)

    cancelled = await service.cancel(submission.run.id)
    assert cancelled.status is RunStatus.CANCELLED and cancelled.result is not None
    (step,) = cancelled.result.steps
    assert step.status is StepStatus.SUCCEEDED and step.result_summary == "found"
    assert site.effects == [f"{submission.run.id}:0:a"]  # once, and never sent again
    async with service.database.read() as conn:
        (entry,) = await ledger_store.list_entries(conn, submission.run.id)
    assert entry.status == "done" and entry.outcome is not None
    assert entry.outcome.status is StepStatus.SUCCEEDED  # so it can be undone

    # The thread goes on: the model is shown the call answered (providers refuse otherwise).
    after = await service.run_now((await service.submit(thread.id, "and now?")).run.id)
    assert after is not None and after.status is RunStatus.SUCCEEDED
    sent = service.scripted.requests[-1].messages  # type: ignore[attr-defined]
    assert every_call_answered(sent)
    told = next(m for m in sent if m.role is Role.TOOL)
    assert "cancelled" in told.content and "had taken effect" in told.content


async def test_a_write_cut_short_before_its_effect_is_reconciled_as_not_done(
    make_service: ServiceFactory,
) -> None:
    site = Site(effect_first=False)
    service: Service = await make_service(
        [{"tool_calls": [{"name": "touch", "arguments": {"text": "b"}}]}]
    )
    service.registry.register(site.spec())
    thread = await service.create_thread()
    submission = await service.submit(thread.id, "touch it", start_here=True)
    await asyncio.wait_for(site.held.reached.wait(), 10)

    cancelled = await service.cancel(submission.run.id)
    assert cancelled.status is RunStatus.CANCELLED and cancelled.result is not None
    (step,) = cancelled.result.steps
    assert step.status is StepStatus.CANCELLED and "did not take effect" in step.result_summary
    assert site.effects == []
    async with service.database.read() as conn:
        (entry,) = await ledger_store.list_entries(conn, submission.run.id)
    assert entry.status == "done" and entry.outcome is not None
    assert entry.outcome.status is StepStatus.CANCELLED
    messages = (await service.thread_detail(thread.id))["messages"]
    assert every_call_answered(messages)
    results = [e.data for e in await service.events(submission.run.id) if e.type is EventType.STEP]
    assert results == [{"index": 0, "total": 1, "status": "cancelled"}]


async def test_interrupt_stops_a_slow_read_and_starts_the_new_message_at_once(
    make_service: ServiceFactory,
) -> None:
    held = Held()

    async def slow(_p: NoteParams, _c: ActionContext, _s: ActionServices) -> ActionResult:
        await held.hold()
        return ActionResult(content="never", summary="never")

    service: Service = await make_service(
        [
            {
                "tool_calls": [
                    {"name": "slow_read", "arguments": {"text": "x"}},
                    {"name": "slow_read", "arguments": {"text": "y"}},
                ]
            },
            {"text": "Here is the answer to the new question."},
        ]
    )
    service.registry.register(action("slow_read", slow, risk=Risk.READ, description="Slow."))
    thread = await service.create_thread()
    first = await service.submit(thread.id, "long job", start_here=True)
    await asyncio.wait_for(held.reached.wait(), 10)

    started = time.monotonic()
    second = await service.submit(
        thread.id, "stop, new question", multitask=Multitask.INTERRUPT, start_here=True
    )
    assert second.started is not None
    answered = await asyncio.wait_for(second.started, 10)
    took = time.monotonic() - started
    assert answered is not None and answered.status is RunStatus.SUCCEEDED, answered
    assert took < 5, took
    old = await service.get_run(first.run.id)
    assert old.status is RunStatus.CANCELLED and old.result is not None
    assert [s.status for s in old.result.steps] == [StepStatus.CANCELLED]
    messages = (await service.thread_detail(thread.id))["messages"]
    assert every_call_answered(messages)
    sent = service.scripted.requests[-1].messages  # type: ignore[attr-defined]
    assert every_call_answered(sent)

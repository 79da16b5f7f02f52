"""How turn outcomes become durable run states, on both databases."""

from __future__ import annotations

from datetime import timedelta

from pressloop.config import Settings
from pressloop.contracts import Role, RunStatus
from pressloop.errors import ProviderNotConfigured
from pressloop.runtime.service import Service
from tests.conftest import FakeClock
from tests.runtime.conftest import ServiceFactory

FAILURE = {"error": {"status": 503, "message": "overloaded"}}


async def test_retryable_failures_back_off_then_dead_letter_then_requeue(
    make_service: ServiceFactory, clock: FakeClock
) -> None:
    service: Service = await make_service([FAILURE] * 3 + [{"text": "back"}], max_attempts=3)
    service.runner.rand = lambda: 1.0  # the largest delay full jitter allows
    thread = await service.create_thread()
    run = (await service.submit(thread.id, "hi")).run

    first = await service.run_now(run.id)
    assert first is not None and first.status is RunStatus.QUEUED and first.attempt == 2
    assert first.not_before == clock() + timedelta(seconds=2.0)  # base 2 s for the first retry
    assert first.error is not None and first.error.retryable
    assert await service.run_now(run.id) is None  # not before its backoff

    clock.advance(2)
    second = await service.run_now(run.id)
    assert second is not None and second.status is RunStatus.QUEUED and second.attempt == 3
    assert second.not_before == clock() + timedelta(seconds=4.0)  # x2

    clock.advance(4)
    dead = await service.run_now(run.id)
    assert dead is not None and dead.status is RunStatus.DEAD
    assert dead.error is not None and dead.error.cls == "ProviderError"

    revived = await service.requeue(run.id)
    assert revived.status is RunStatus.QUEUED and revived.attempt == 0
    done = await service.run_now(run.id)
    assert done is not None and done.status is RunStatus.SUCCEEDED


async def test_no_provider_configured_fails_the_turn_with_a_clear_message(
    database_url: str, tmp_path, clock: FakeClock, database: object
) -> None:
    def missing() -> object:
        raise ProviderNotConfigured("No model provider is configured. Set PRESSLOOP_PROVIDER")

    settings = Settings(data_dir=tmp_path, database_url=database_url)
    service = await Service.open(settings, provider=missing, now=clock)  # type: ignore[arg-type]
    try:
        thread = await service.create_thread()
        run = await service.run_now((await service.submit(thread.id, "hi")).run.id)
        assert run is not None and run.status is RunStatus.FAILED
        assert run.error is not None and "PRESSLOOP_PROVIDER" in run.error.message
        events = await service.events(run.id)
        assert events[-1].data["status"] == "failed"
        # The thread keeps the person's message, then Pressloop's notice, and stays usable.
        detail = await service.thread_detail(thread.id)
        hi, notice = detail["messages"]
        assert hi.content == "hi" and notice.role is Role.ASSISTANT and notice.name == "pressloop"
        assert notice.content.startswith("Pressloop is not set up to run this")
        assert events[-1].data["notice"] == notice.content
    finally:
        await service.close()


async def test_a_failed_turn_leaves_a_transcript_every_provider_accepts(
    make_service: ServiceFactory,
) -> None:
    service: Service = await make_service(
        [{"tool_calls": [{"name": "recall", "arguments": {}}]}],
    )
    thread = await service.create_thread()
    # Over its token budget right after the model asked for an action: the call is left open.
    run = (await service.submit(thread.id, "loop", policy={"max_tokens": 1})).run
    finished = await service.run_now(run.id)
    assert finished is not None and finished.status is RunStatus.FAILED
    messages = (await service.thread_detail(thread.id))["messages"]
    calls = [c.id for m in messages if m.role is Role.ASSISTANT for c in m.tool_calls]
    answered = [m.tool_call_id for m in messages if m.role is Role.TOOL]
    assert calls and sorted(calls) == sorted(answered)


async def test_memories_reach_the_prompt_of_later_threads(make_service: ServiceFactory) -> None:
    service: Service = await make_service(
        [
            {"tool_calls": [{"name": "remember", "arguments": {"content": "Owner prefers teal"}}]},
            {"text": "Saved."},
            {"text": "Teal it is."},
        ]
    )
    first = await service.create_thread()
    await service.run_now((await service.submit(first.id, "remember teal")).run.id)
    second = await service.create_thread()
    await service.run_now((await service.submit(second.id, "which colour do I like, teal?")).run.id)
    system = service.scripted.requests[-1].system  # type: ignore[attr-defined]
    assert "## MEMORY_CONTEXT\n- Owner prefers teal" in system


async def test_same_idempotency_key_gives_the_same_run(make_service: ServiceFactory) -> None:
    service: Service = await make_service([{"text": "once"}])
    thread = await service.create_thread()
    first = await service.submit(thread.id, "hi", idempotency_key="k1")
    again = await service.submit(thread.id, "hi", idempotency_key="k1")
    assert first.created and not again.created and again.run.id == first.run.id
    assert len(await service.list_runs(thread_id=thread.id)) == 1


async def test_cancel_a_queued_run(make_service: ServiceFactory) -> None:
    service: Service = await make_service([])
    thread = await service.create_thread()
    run = (await service.submit(thread.id, "hi")).run
    cancelled = await service.cancel(run.id)
    assert cancelled.status is RunStatus.CANCELLED
    assert await service.run_now(run.id) is None

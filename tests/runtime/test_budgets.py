"""Daily budgets and the per-user cooldown, on both databases."""

from __future__ import annotations

import pytest

from pressloop.contracts import RunStatus
from pressloop.errors import RateLimited
from pressloop.runtime.service import Service
from pressloop.store import usage as usage_store
from tests.conftest import FakeClock
from tests.runtime.conftest import ServiceFactory

RECALL = {"tool_calls": [{"name": "recall", "arguments": {}}]}


async def test_a_users_action_budget_refuses_the_next_turn_clearly(
    make_service: ServiceFactory,
) -> None:
    service: Service = await make_service(
        [RECALL, RECALL, {"text": "two recalls"}, {"text": "never"}], budget_user_actions=2
    )
    thread = await service.create_thread()
    first = await service.run_now((await service.submit(thread.id, "a", user="ann")).run.id)
    assert first is not None and first.status is RunStatus.SUCCEEDED
    refused = await service.run_now((await service.submit(thread.id, "b", user="ann")).run.id)
    assert refused is not None and refused.status is RunStatus.FAILED
    assert refused.error is not None and refused.error.cls == "BudgetExceeded"
    assert (
        "action budget of user ann" in refused.error.message and "2 of 2" in refused.error.message
    )
    assert service.scripted.remaining == 1  # type: ignore[attr-defined]  # the model was not asked
    # Another user still has a budget; the refusal was counted for ann.
    other = await service.run_now((await service.submit(thread.id, "c", user="bo")).run.id)
    assert other is not None and other.status is RunStatus.SUCCEEDED
    await service.runner.usage.flush()  # counters are written at most once a second
    async with service.database.read() as conn:
        rows = await usage_store.list_usage(conn, since_day="2000-01-01", scope="user")
    assert {r["subject"]: r["refusals"] for r in rows} == {"ann": 1, "bo": 0}


async def test_the_sites_token_budget_covers_every_user(make_service: ServiceFactory) -> None:
    service: Service = await make_service(
        [{"text": "big", "usage": {"input": 900, "output": 200}}, {"text": "never"}],
        budget_site_tokens=1000,
    )
    thread = await service.create_thread()
    await service.run_now((await service.submit(thread.id, "a", user="ann")).run.id)
    refused = await service.run_now((await service.submit(thread.id, "b", user="bo")).run.id)
    assert refused is not None and refused.error is not None
    assert "token budget of the site" in refused.error.message


async def test_the_cooldown_refuses_a_message_sent_too_soon(
    make_service: ServiceFactory, clock: FakeClock
) -> None:
    service: Service = await make_service([], cooldown_s=5)
    thread = await service.create_thread()
    await service.submit(thread.id, "first", user="ann")
    clock.advance(2)
    with pytest.raises(RateLimited, match="wait 5 s") as refused:
        await service.submit(thread.id, "second", user="ann")
    assert refused.value.retry_after_s == pytest.approx(3)
    await service.submit(thread.id, "another person", user="bo")  # per user
    clock.advance(3)
    await service.submit(thread.id, "third", user="ann")  # after the cooldown

"""Daily budgets and the per-user cooldown, on both databases."""

from __future__ import annotations

import json

import pytest

from pressloop.actions.registry import Registry
from pressloop.config import Settings
from pressloop.contracts import DecisionProtocol, RunStatus
from pressloop.engine.ports import PromptContext
from pressloop.engine.prompt import system_prompt
from pressloop.errors import BudgetSpent, RateLimited
from pressloop.runtime.service import Service
from pressloop.runtime.wiring import default_actions
from pressloop.store import usage as usage_store
from tests.conftest import FakeClock
from tests.runtime.conftest import ServiceFactory

RECALL = {"tool_calls": [{"name": "recall", "arguments": {}}]}


async def test_a_users_spent_action_budget_refuses_the_next_turn_before_it_is_stored(
    make_service: ServiceFactory,
) -> None:
    service: Service = await make_service(
        [RECALL, RECALL, {"text": "two recalls"}, {"text": "never"}], budget_user_actions=2
    )
    thread = await service.create_thread()
    first = await service.run_now((await service.submit(thread.id, "a", user="ann")).run.id)
    assert first is not None and first.status is RunStatus.SUCCEEDED
    with pytest.raises(BudgetSpent) as refused:
        await service.submit(thread.id, "b", user="ann")
    message = refused.value.message
    assert "action budget of user ann" in message and "2 of 2" in message
    assert "resets at midnight UTC, in 12 h 0 min" in message  # the clock says 12:00 UTC
    assert refused.value.retry_after_s == 12 * 3600
    assert len(await service.list_runs(thread_id=thread.id)) == 1  # nothing was stored
    assert service.scripted.remaining == 1  # type: ignore[attr-defined]  # the model was not asked
    # Another user still has a budget; the refusal was counted for ann.
    other = await service.run_now((await service.submit(thread.id, "c", user="bo")).run.id)
    assert other is not None and other.status is RunStatus.SUCCEEDED
    await service.runner.usage.flush()  # counters are written at most once a second
    async with service.database.read() as conn:
        rows = await usage_store.list_usage(conn, since_day="2000-01-01", scope="user")
    assert {r["subject"]: r["refusals"] for r in rows} == {"ann": 1, "bo": 0}


async def test_a_turn_accepted_before_the_budget_was_spent_fails_clearly_when_it_starts(
    make_service: ServiceFactory,
) -> None:
    service: Service = await make_service(
        [RECALL, {"text": "one recall"}, {"text": "never"}], budget_user_actions=1
    )
    first = (await service.submit((await service.create_thread()).id, "a", user="ann")).run
    queued = (await service.submit((await service.create_thread()).id, "b", user="ann")).run
    assert (await service.run_now(first.id)).status is RunStatus.SUCCEEDED  # type: ignore[union-attr]
    refused = await service.run_now(queued.id)
    assert refused is not None and refused.status is RunStatus.FAILED
    assert refused.error is not None and refused.error.cls == "BudgetExceeded"
    assert "1 of 1 actions" in refused.error.message
    assert service.scripted.remaining == 1  # type: ignore[attr-defined]


async def test_the_sites_token_budget_covers_every_user(make_service: ServiceFactory) -> None:
    service: Service = await make_service(
        [{"text": "big", "usage": {"input": 900, "output": 200}}, {"text": "never"}],
        budget_site_tokens=1000,
    )
    thread = await service.create_thread()
    await service.run_now((await service.submit(thread.id, "a", user="ann")).run.id)
    with pytest.raises(BudgetSpent, match="token budget of the site is used up \\(1100 of 1000"):
        await service.submit(thread.id, "b", user="bo")


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


# A person's working day, as the default budgets are sized (docs/configuration.md, Budgets).
DAY_TURNS = 100  # a turn every ~5 minutes for 8 hours
CALLS_PER_TURN = 2  # one action, then the answer
ACTIONS_PER_TURN = 2
CONTEXT_TOKENS = 2_500  # site context, memories, the thread's recent messages, the turn's own
OUTPUT_TOKENS = 300


def catalog_request_tokens() -> int:
    """What every model call sends before any conversation, with the full default catalog
    (memory, spawn, web and the WordPress pack), counted as characters / 4: the larger of the
    native-tools request (system prompt + tool schemas) and the JSON protocol's system prompt
    (which spells each action's params out)."""
    catalog = Registry(default_actions(wordpress=True)).catalog()
    tools = [
        {"type": "function", "function": {"name": e.name, "description": e.description,
                                          "parameters": e.params_schema}}
        for e in catalog
    ]  # fmt: skip
    with_tools = len(system_prompt(PromptContext(), catalog, DecisionProtocol.TOOLS))
    with_tools += len(json.dumps(tools))
    as_json = len(system_prompt(PromptContext(), catalog, DecisionProtocol.JSON))
    return max(with_tools, as_json) // 4


def test_the_default_budgets_cover_a_working_day_with_the_full_catalog() -> None:
    settings = Settings(_env_file=None)
    per_call = catalog_request_tokens() + CONTEXT_TOKENS + OUTPUT_TOKENS
    day = DAY_TURNS * CALLS_PER_TURN * per_call
    assert 8_000 < catalog_request_tokens() < 12_000  # 9,063 when this was written
    assert day <= settings.budget_user_tokens <= 2 * day
    assert settings.budget_user_actions >= DAY_TURNS * ACTIONS_PER_TURN
    # The site's budget holds a few people working and the heartbeats.
    assert settings.budget_site_tokens >= 5 * settings.budget_user_tokens
    assert settings.budget_site_actions >= 5 * settings.budget_user_actions

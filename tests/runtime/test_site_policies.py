"""Site-wide policy defaults per trigger (the settings table), on SQLite and PostgreSQL.

Built-in -> site -> agent -> thread -> request: the site layer is what a person sets for every
agent at once; agent and thread settings still override it, a request can only tighten it.
Every kind of run takes it when created: chat, heartbeat, spawned, and undo's policy check.
"""

from __future__ import annotations

from typing import Any

import pytest

from pressloop.actions.registry import ActionResult, ActionServices
from pressloop.contracts import ActionContext, PolicyMode, Risk, StepStatus, Trigger
from pressloop.errors import InvalidRequest
from pressloop.policy import resolve_policy
from pressloop.runtime.heartbeat_runs import Scheduler
from pressloop.runtime.heartbeat_schedules import Schedules
from pressloop.runtime.service import Service
from pressloop.runtime.site_policies import set_trigger_defaults, trigger_defaults
from pressloop.store import agents as agent_store
from tests.conftest import FakeClock
from tests.runtime.conftest import ServiceFactory
from tests.support.actions import NoteParams, action

RAN: list[str] = []


async def _prune(params: NoteParams, _c: ActionContext, _s: ActionServices) -> ActionResult:
    RAN.append(params.text)
    return ActionResult(content="pruned", summary="pruned")


PRUNE = action("prune_drafts", _prune, risk=Risk.DESTRUCTIVE, description="Deletes drafts.")


async def set_defaults(service: Service, trigger: str, changes: Any) -> dict[str, Any]:
    async with service.database.write() as conn:
        return await set_trigger_defaults(conn, trigger, changes, now=service.now())


async def defaults(service: Service) -> dict[str, dict[str, Any]]:
    async with service.database.read() as conn:
        return await trigger_defaults(conn)


async def test_defaults_are_set_read_back_and_reset_per_trigger(
    make_service: ServiceFactory,
) -> None:
    service: Service = await make_service([])
    shown = await defaults(service)
    assert set(shown) == {t.value for t in Trigger}
    assert shown["chat"] == {"changes": {}, "policy": resolve_policy(Trigger.CHAT).model_dump()}

    saved = await set_defaults(service, "heartbeat", {"destructive": "deny", "max_rounds": "3"})
    assert saved["changes"] == {"destructive": "deny", "max_rounds": 3}  # normalised
    await set_defaults(service, Trigger.CHAT, {"wall_time_s": 120})
    shown = await defaults(service)
    assert shown["heartbeat"]["policy"]["destructive"] == "deny"
    assert shown["heartbeat"]["policy"]["max_rounds"] == 3
    assert shown["heartbeat"]["policy"]["wall_time_s"] == 120  # the built-in value stays
    assert shown["chat"]["changes"] == {"wall_time_s": 120}  # one trigger never clobbers another

    await set_defaults(service, "heartbeat", None)
    shown = await defaults(service)
    assert shown["heartbeat"]["changes"] == {}
    assert shown["heartbeat"]["policy"] == resolve_policy(Trigger.HEARTBEAT).model_dump()


@pytest.mark.parametrize(
    ("trigger", "changes", "expected"),
    [
        ("cron", {"max_rounds": 2}, "unknown trigger 'cron'"),
        ("chat", {"max_round": 2}, "max_round: Extra inputs are not permitted"),
        ("chat", {"destructive": "maybe"}, "destructive: Input should be 'allow'"),
        ("chat", {"max_rounds": 0}, "max_rounds: Input should be greater than or equal to 1"),
        ("chat", ["deny"], "must be an object"),
    ],
)
async def test_invalid_defaults_are_refused_and_nothing_is_stored(
    make_service: ServiceFactory, trigger: str, changes: Any, expected: str
) -> None:
    service: Service = await make_service([])
    with pytest.raises(InvalidRequest, match=expected):
        await set_defaults(service, trigger, changes)
    assert all(entry["changes"] == {} for entry in (await defaults(service)).values())


async def test_agent_and_thread_override_the_site_and_a_request_only_tightens(
    make_service: ServiceFactory,
) -> None:
    service: Service = await make_service([])
    await set_defaults(service, "chat", {"max_rounds": 3, "write": "confirm"})
    thread = await service.create_thread()

    run = (await service.submit(thread.id, "hello")).run
    assert (run.policy.max_rounds, run.policy.write) == (3, PolicyMode.CONFIRM)

    # A request can tighten the site's defaults, never loosen them.
    loose = {"max_rounds": 8, "write": "allow", "destructive": "deny"}
    run = (await service.submit(thread.id, "again", policy=loose)).run
    assert (run.policy.max_rounds, run.policy.write) == (3, PolicyMode.CONFIRM)
    assert run.policy.destructive is PolicyMode.DENY

    async with service.database.write() as conn:
        await agent_store.update_agent(conn, "default", policy={"chat": {"max_rounds": 5}})
    run = (await service.submit(thread.id, "agent")).run
    assert (run.policy.max_rounds, run.policy.write) == (5, PolicyMode.CONFIRM)

    own = await service.create_thread(metadata={"policy": {"chat": {"write": "allow"}}})
    run = (await service.submit(own.id, "thread")).run
    assert (run.policy.max_rounds, run.policy.write) == (5, PolicyMode.ALLOW)


async def test_a_site_default_decides_what_a_chat_run_may_do(
    make_service: ServiceFactory,
) -> None:
    RAN.clear()
    service: Service = await make_service(
        [
            {"tool_calls": [{"name": "prune_drafts", "arguments": {"text": "first"}}]},
            {"text": "Not allowed here."},
            {"tool_calls": [{"name": "prune_drafts", "arguments": {"text": "second"}}]},
            {"text": "Pruned."},
        ]
    )
    service.registry.register(PRUNE)
    await set_defaults(service, "chat", {"destructive": "deny"})
    thread = await service.create_thread()
    denied = await service.run_now((await service.submit(thread.id, "prune")).run.id)
    assert denied is not None and denied.result is not None
    assert denied.result.steps[0].status is StepStatus.DENIED and RAN == []

    await set_defaults(service, "chat", {"destructive": "allow"})  # the site trusts chat now
    allowed = await service.run_now((await service.submit(thread.id, "prune")).run.id)
    assert allowed is not None and allowed.result is not None
    assert allowed.result.steps[0].status is StepStatus.SUCCEEDED and RAN == ["second"]


async def test_heartbeat_and_spawned_runs_take_the_site_defaults(
    make_service: ServiceFactory, clock: FakeClock
) -> None:
    service: Service = await make_service([])
    await set_defaults(service, "heartbeat", {"max_rounds": 2})
    await set_defaults(service, "spawned", {"max_calls_per_round": 2, "destructive": "confirm"})

    await Schedules(service.database, service.now).create(kind="interval", interval_s=60)
    clock.advance(61)
    scheduler = Scheduler(database=service.database, now=service.now, max_attempts=3, poll_s=1)
    (beat_id,) = await scheduler.tick()
    assert (await service.get_run(beat_id)).policy.max_rounds == 2

    root = await service.create_thread()
    spawned = (await service.spawn(root.id, "look around")).run
    assert spawned.policy.max_calls_per_round == 2
    assert spawned.policy.destructive is PolicyMode.CONFIRM

"""Spawned agents on both databases: limits, results back to the parent, the spawned policy."""

from __future__ import annotations

import pytest

from pressloop.actions.registry import ActionResult, ActionServices
from pressloop.actions.spawn import SPAWN_ACTIONS
from pressloop.contracts import ActionContext, Risk, Role, RunStatus, StepStatus, Trigger
from pressloop.errors import Conflict
from pressloop.runtime.service import Service
from pressloop.runtime.wiring import default_actions
from tests.runtime.conftest import ServiceFactory
from tests.support.actions import NoteParams, action


async def _wipe(_p: NoteParams, _c: ActionContext, _s: ActionServices) -> ActionResult:
    raise AssertionError("a destructive action ran inside a spawned run")


WIPE = action("wipe_site", _wipe, risk=Risk.DESTRUCTIVE, description="Destroys things.")


async def test_depth_and_children_limits_are_refused_clearly(make_service: ServiceFactory) -> None:
    service: Service = await make_service([])
    root = await service.create_thread()
    child = (await service.spawn(root.id, "level 1")).thread
    grandchild = (await service.spawn(child.id, "level 2")).thread
    assert (child.depth, grandchild.depth) == (1, 2)
    with pytest.raises(Conflict, match="at most 2 levels deep"):
        await service.spawn(grandchild.id, "level 3")

    for i in range(4):  # the root has one live child already
        await service.spawn(root.id, f"task {i}")
    with pytest.raises(Conflict, match="5 live children"):
        await service.spawn(root.id, "one too many")


async def test_spawn_respects_idempotency_keys(make_service: ServiceFactory) -> None:
    service: Service = await make_service([])
    root = await service.create_thread()
    first = await service.spawn(root.id, "once", idempotency_key="k")
    again = await service.spawn(root.id, "once", idempotency_key="k")
    assert again.thread.id == first.thread.id and not again.created
    assert len((await service.thread_detail(root.id))["children"]) == 1


async def test_a_waiting_parent_is_woken_with_the_childs_result(
    make_service: ServiceFactory,
) -> None:
    service: Service = await make_service(
        [
            # The parent's turn: spawn a helper and wait for it.
            {
                "tool_calls": [
                    {
                        "name": "spawn_agent",
                        "arguments": {"message": "Count the drafts", "wait": True},
                    }
                ]
            },
            {"text": "I asked a helper."},
            # The child's turn.
            {"text": "There are 3 drafts."},
            # The parent, woken by the child's result.
            {"text": "The helper found 3 drafts."},
        ]
    )
    root = await service.create_thread()
    parent_run = await service.run_now((await service.submit(root.id, "How many drafts?")).run.id)
    assert parent_run is not None and parent_run.status is RunStatus.SUCCEEDED
    (child,) = (await service.thread_detail(root.id))["children"]
    (child_run,) = await service.list_runs(thread_id=child.id)
    assert child_run.trigger is Trigger.SPAWNED and child.parent_id == root.id

    finished_child = await service.run_now(child_run.id)
    assert finished_child is not None and finished_child.status is RunStatus.SUCCEEDED
    wake = [r for r in await service.list_runs(thread_id=root.id) if r.id != parent_run.id]
    assert len(wake) == 1 and "There are 3 drafts." in (wake[0].input or "")
    woken = await service.run_now(wake[0].id)
    assert woken is not None and woken.result is not None
    assert woken.result.assistant_text == "The helper found 3 drafts."


async def test_a_childs_result_is_posted_to_a_parent_that_does_not_wait(
    make_service: ServiceFactory,
) -> None:
    service: Service = await make_service([{"text": "Done the chore."}])
    root = await service.create_thread()
    spawned = await service.spawn(root.id, "Do a chore")
    await service.run_now(spawned.run.id)
    messages = (await service.thread_detail(root.id))["messages"]
    assert messages[-1].role is Role.USER and "Done the chore." in messages[-1].content
    assert len(await service.list_runs(thread_id=root.id)) == 0


async def test_a_destructive_action_in_a_spawned_run_is_denied(
    make_service: ServiceFactory,
) -> None:
    service: Service = await make_service(
        [
            {"tool_calls": [{"name": "wipe_site", "arguments": {"text": "all"}}]},
            {"text": "Not allowed."},
        ],
    )
    service.registry.register(WIPE)
    root = await service.create_thread()
    spawned = await service.spawn(root.id, "wipe the site")
    run = await service.run_now(spawned.run.id)
    assert run is not None and run.result is not None
    assert run.result.steps[0].status is StepStatus.DENIED
    assert "forbids destructive" in run.result.steps[0].result_summary


def test_spawn_agent_is_in_the_default_catalog() -> None:
    assert {a.name for a in default_actions()} >= {s.name for s in SPAWN_ACTIONS}

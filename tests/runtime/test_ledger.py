"""The action ledger on both databases: a step interrupted after its effect never runs twice."""

from __future__ import annotations

import asyncio

import sqlalchemy as sa

from pressloop.actions.registry import ActionResult, ActionServices, ActionSpec
from pressloop.contracts import ActionContext, Checkpoint, RunStatus, StepStatus
from pressloop.errors import ActionError
from pressloop.runtime.service import Service
from pressloop.store import ledger as ledger_store
from pressloop.store.schema import runs
from tests.runtime.conftest import ServiceFactory
from tests.support.actions import Effects, NoteParams, action


class Site(Effects):
    """Stands for the outside world an action changes: a list of effects, each made once."""

    def __init__(self) -> None:
        super().__init__()
        self.hang = True
        self.effect_made = asyncio.Event()

    async def touch(self, p: NoteParams, c: ActionContext, _s: ActionServices) -> ActionResult:
        self.effects.append(self.key(p, c))
        self.effect_made.set()
        if self.hang:  # the worker "dies" here: after the effect, before the outcome is stored
            await asyncio.Event().wait()
        return ActionResult(content="touched", summary="touched")

    def specs(self) -> list[ActionSpec]:
        return [self.spec("touch"), self.spec("touch_blind", reconcile=False)]


SCRIPT = [
    {"tool_calls": [{"name": "touch", "arguments": {"text": "a"}}]},
    {"text": "Done."},
]


async def interrupt_after_effect(service: Service, site: Site, run_id: str) -> None:
    task = asyncio.create_task(service.run_now(run_id))
    await asyncio.wait_for(site.effect_made.wait(), 10)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_an_interrupted_step_is_reconciled_not_repeated(make_service: ServiceFactory) -> None:
    site = Site()
    service: Service = await make_service(SCRIPT)
    for spec in site.specs():
        service.registry.register(spec)
    thread = await service.create_thread()
    run = (await service.submit(thread.id, "touch it")).run
    await interrupt_after_effect(service, site, run.id)

    requeued = await service.get_run(run.id)
    assert requeued.status is RunStatus.QUEUED  # handed back, resumes from its checkpoint
    async with service.database.read() as conn:
        (entry,) = await ledger_store.list_entries(conn, run.id)
    assert entry.status == "intent" and entry.outcome is None

    site.hang = False
    done = await service.run_now(run.id)
    assert done is not None and done.status is RunStatus.SUCCEEDED
    assert site.effects == [f"{run.id}:0:a"]  # the effect happened once
    assert done.result is not None and done.result.steps[0].result_summary == "found"
    async with service.database.read() as conn:
        (entry,) = await ledger_store.list_entries(conn, run.id)
    assert entry.status == "done" and entry.outcome is not None


async def test_an_interrupted_step_without_a_check_is_reported_unknown(
    make_service: ServiceFactory,
) -> None:
    site = Site()
    service: Service = await make_service(
        [
            {"tool_calls": [{"name": "touch_blind", "arguments": {"text": "b"}}]},
            {"text": "I could not tell."},
        ]
    )
    for spec in site.specs():
        service.registry.register(spec)
    thread = await service.create_thread()
    run = (await service.submit(thread.id, "touch it")).run
    await interrupt_after_effect(service, site, run.id)
    site.hang = False
    done = await service.run_now(run.id)
    assert done is not None and done.result is not None
    assert site.effects == [f"{run.id}:0:b"]
    assert done.result.steps[0].status is StepStatus.FAILED
    assert "outcome of touch_blind is unknown" in done.result.steps[0].result_summary


async def test_a_finished_step_is_replayed_from_the_ledger(make_service: ServiceFactory) -> None:
    site = Site()
    site.hang = False
    service: Service = await make_service([*SCRIPT, {"text": "Done again."}])
    for spec in site.specs():
        service.registry.register(spec)
    thread = await service.create_thread()
    run = await service.run_now((await service.submit(thread.id, "touch it")).run.id)
    assert run is not None and run.checkpoint is not None and site.effects == [f"{run.id}:0:a"]

    # Put the run back where a worker that died between the ledger's commit and the
    # checkpoint's commit would leave it: the call asked for, its result not in the checkpoint.
    before_result = Checkpoint(round=1, messages=run.checkpoint.messages[:2])
    async with service.database.write() as conn:
        await conn.execute(
            sa.update(runs)
            .where(runs.c.id == run.id)
            .values(status="queued", checkpoint=before_result.model_dump(mode="json"))
        )
    resumed = await service.run_now(run.id)
    assert resumed is not None and resumed.status is RunStatus.SUCCEEDED
    assert site.effects == [f"{run.id}:0:a"]  # replayed from the ledger, not run again
    assert resumed.result is not None and resumed.result.steps[0].result_summary == "touched"


class Unreadable:
    """An action whose answer, after the write was sent, does not say what happened."""

    def __init__(self, *, made: bool) -> None:
        self.made = made
        self.calls = 0

    async def send(self, _p: NoteParams, _c: ActionContext, _s: ActionServices) -> ActionResult:
        self.calls += 1
        lost = ActionError("the site answered 200 with a body that is not JSON")
        lost.outcome_unknown = True
        raise lost

    async def find(
        self, p: NoteParams, _c: ActionContext, _s: ActionServices
    ) -> ActionResult | None:
        return (
            ActionResult(content={"made": p.text}, summary="made (found again)")
            if self.made
            else None
        )

    def spec(self) -> ActionSpec:
        return action("send", self.send, description="Change the site.", reconcile=self.find)


async def test_an_unreadable_answer_is_checked_at_once_and_never_resent(
    make_service: ServiceFactory,
) -> None:
    script = [
        {"tool_calls": [{"name": "send", "arguments": {"text": "x"}}]},
        {"text": "Told."},
    ]
    for made, status, fate in (
        (True, StepStatus.SUCCEEDED, "ran"),
        (False, StepStatus.FAILED, "unknown"),
    ):
        action = Unreadable(made=made)
        service: Service = await make_service(script)
        service.registry.register(action.spec())
        thread = await service.create_thread()
        run = await service.run_now((await service.submit(thread.id, "send it")).run.id)
        assert run is not None and run.status is RunStatus.SUCCEEDED and run.result is not None
        assert run.result.steps[0].status is status and action.calls == 1
        async with service.database.read() as conn:
            (entry,) = await ledger_store.list_entries(conn, run.id)
        assert entry.fate == fate
        if not made:
            assert "may nevertheless have been made" in run.result.steps[0].result_summary

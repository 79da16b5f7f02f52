"""Pressloop in-process: `Service.submit(start_here=True)` (the run claimed in the transaction that
creates it, then run in this process), the path a chat `wait` takes, with the
`openai-compatible` provider pointed at the bench's model server (the same SDK client cost as
every peer). Workload 3 does not use `stream` here: it goes through `pressloop serve`'s real HTTP
path (see streaming.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

from bench.noop_pack import ACTIONS
from bench.peers.system import ROUNDS, Target, TurnFailed, check_answer, check_turn
from pressloop.config import Settings
from pressloop.contracts import EventType, RunStatus, StepStatus
from pressloop.runtime.service import Service

# Tables that are not part of a conversation: a history prefill leaves them alone.
NOT_HISTORY = (
    "alembic_version",
    "agents",
    "usage_daily",
    "api_tokens",
    "approvals",
    "schedules",
    "memories",
    "settings",
)


def settings_for(target: Target) -> Settings:
    """The service's settings: the model server, the database, no budgets or cooldown (a
    benchmark sends thousands of turns a minute as one user). Everything else (pool, leases)
    comes from the environment or the defaults."""
    return Settings(
        data_dir=Path(target.data_dir),
        database_url=target.sqlalchemy_url(),
        provider="openai-compatible",
        base_url=target.model_url,
        cooldown_s=0,
        budget_user_actions=0,
        budget_user_tokens=0,
        budget_site_actions=0,
        budget_site_tokens=0,
    )


class PressloopSystem:
    key = "pressloop"
    streams = True
    clone_excluded = NOT_HISTORY

    def __init__(self) -> None:
        self.service: Service | None = None

    async def open(self, target: Target) -> None:
        self.service = await Service.open(settings_for(target), actions=list(ACTIONS))

    def _service(self) -> Service:
        assert self.service is not None, "open() first"
        return self.service

    async def new_thread(self) -> str:
        return (await self._service().create_thread(title="bench")).id

    async def turn(self, thread: str, message: str) -> None:
        service = self._service()
        submission = await service.submit(thread, message, user="bench", start_here=True)
        assert submission.started is not None
        run = await submission.started
        self._check(run)

    def _check(self, run: object) -> None:
        from pressloop.store.records import RunRecord

        if not isinstance(run, RunRecord) or run.status is not RunStatus.SUCCEEDED:
            raise TurnFailed(f"pressloop: the run did not succeed: {run}")
        assert run.result is not None
        steps = run.result.steps
        succeeded = sum(1 for s in steps if s.status is StepStatus.SUCCEEDED)
        if succeeded != len(steps):
            raise TurnFailed(f"pressloop: steps {steps}")
        check_turn(self.key, succeeded, run.result.assistant_text or "")

    async def stream(self, thread: str, message: str) -> AsyncIterator[str]:
        service = self._service()
        submission = await service.submit(thread, message, user="bench", start_here=True)
        async for event in service.follow(submission.run.id):
            if event.type is EventType.MESSAGE and "delta" in event.data:
                yield str(event.data["delta"])

    async def resume(self, thread: str, message: str) -> None:
        """What a worker does after a crash: once the dead process's lease has expired, claim
        the run (`run_now` reclaims expired leases) and continue from its checkpoint."""
        service = self._service()
        runs = await service.list_runs(thread_id=thread)
        if not runs:
            raise TurnFailed("pressloop: the thread has no run to resume")
        for _ in range(120):
            run = await service.run_now(runs[0].id)
            if run is not None:
                if run.status is not RunStatus.SUCCEEDED or run.result is None:
                    raise TurnFailed(f"pressloop: the resumed run did not succeed: {run}")
                check_answer(self.key, run.result.assistant_text or "")
                return
            await asyncio.sleep(0.5)  # the lease has not expired yet
        raise TurnFailed(f"pressloop: run {runs[0].id} could not be claimed ({ROUNDS} rounds)")

    async def close(self) -> None:
        if self.service is not None:
            await self.service.close()


def build(_key: str) -> PressloopSystem:
    return PressloopSystem()

"""The two harnesses of the WordPress action tests: each drives the real `Executor` with an
in-memory ledger (`MemoryLedger`, the executor's `LedgerPort`), so snapshots are taken the way
the runtime takes them and undo gets the same inputs. `Harness` holds the content actions (posts,
pages, terms), `Admin` the administration ones (users, plugins, settings, comments, media). The
fixtures `wp` and `admin` (conftest.py) build them on the real local WordPress.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pressloop.actions.executor import Executor
from pressloop.actions.registry import ActionServices
from pressloop.actions.wordpress import WordPressClient
from pressloop.actions.wordpress.admin import ADMIN_ACTIONS
from pressloop.actions.wordpress.content import CONTENT_ACTIONS
from pressloop.contracts import (
    ActionCall,
    ActionContext,
    ActionOutcome,
    Policy,
    PolicyMode,
    StepStatus,
    Trigger,
)
from pressloop.policy import resolve_policy
from tests.support.ledger import MemoryLedger, Step

CONTENT_SPECS = {spec.name: spec for spec in CONTENT_ACTIONS}
ADMIN_SPECS = {spec.name: spec for spec in ADMIN_ACTIONS}
OPEN = Policy(destructive=PolicyMode.ALLOW)
PLUGIN = "pressloop-test-plugin"


@dataclass
class Harness:
    client: WordPressClient
    ledger: MemoryLedger
    executor: Executor
    step: int = 0

    def context(self, policy: Policy | None = None, run_id: str = "run-1") -> ActionContext:
        self.step += 1
        return ActionContext(
            run_id=run_id,
            thread_id="thread-1",
            trigger=Trigger.CHAT,
            step_index=self.step,
            policy=policy or resolve_policy(Trigger.CHAT),
        )

    async def run(
        self, action: str, policy: Policy | None = None, /, **params: Any
    ) -> ActionOutcome:
        return await self.executor.run(
            ActionCall(id=f"call-{self.step}", name=action, params=params), self.context(policy)
        )

    async def ok(self, action: str, policy: Policy | None = None, /, **params: Any) -> Any:
        outcome = await self.run(action, policy, **params)
        assert outcome.status is StepStatus.SUCCEEDED, outcome.content
        return outcome.data

    def last(self) -> Step:
        return self.ledger.steps[("run-1", self.step)]

    async def undo(self, name: str, step_index: int | None = None) -> Any:
        """Undo a step (the last one unless told) the way the runtime does: from its snapshot
        and its outcome's data."""
        step = self.ledger.steps[("run-1", step_index or self.step)]
        undo = CONTENT_SPECS[name].undo
        assert undo is not None and step.outcome is not None
        return (await undo(step.snapshot, step.outcome.data, self.services)).content

    @property
    def services(self) -> ActionServices:
        return self.executor.services

    async def read(self, route: str) -> Any:
        return await self.client.get(route)


@dataclass
class Admin:
    client: WordPressClient
    ledger: MemoryLedger
    executor: Executor
    step: int = 0

    def context(self, policy: Policy) -> ActionContext:
        self.step += 1
        return ActionContext(
            run_id="run-1",
            thread_id="thread-1",
            trigger=Trigger.CHAT,
            step_index=self.step,
            policy=policy,
        )

    async def run(self, action: str, policy: Policy = OPEN, /, **params: Any) -> ActionOutcome:
        call = ActionCall(id=f"call-{self.step}", name=action, params=params)
        return await self.executor.run(call, self.context(policy))

    async def ok(self, action: str, /, **params: Any) -> Any:
        outcome = await self.run(action, **params)
        assert outcome.status is StepStatus.SUCCEEDED, outcome.content
        return outcome.data

    async def fails(self, action: str, /, **params: Any) -> str:
        outcome = await self.run(action, **params)
        assert outcome.status is StepStatus.FAILED, outcome.content
        assert outcome.error is not None
        return outcome.error

    async def undo(self, action: str) -> Any:
        """Undo the latest `action` step as the runtime does: from its snapshot and outcome."""
        step = [s for s in self.ledger.steps.values() if s.call.name == action][-1]
        undo = ADMIN_SPECS[action].undo
        assert undo is not None and step.outcome is not None
        return (await undo(step.snapshot, step.outcome.data, self.executor.services)).content

    async def preview(self, action: str, **params: Any) -> Any:
        spec = ADMIN_SPECS[action]
        assert spec.preview is not None
        return await spec.preview(
            spec.params.model_validate(params), self.context(OPEN), self.executor.services
        )

    async def user_ids(self) -> set[int]:
        return {u["id"] for u in await self.client.get("/wp/v2/users", {"per_page": 100})}

    async def plugin_status(self) -> str:
        return str((await self.client.get(f"/wp/v2/plugins/{PLUGIN}"))["status"])

"""The daily budgets where they are spent: before a new turn is stored, before each model call
and before each action of a run (DESIGN.md section 6).

Today's use is what the table holds, plus what this process counted and has not written yet
(`UsageBuffer`), plus what its running turns used so far (their last checkpoints, less what was
counted when they rested before). Other processes' unwritten counts show within one
PRESSLOOP_USAGE_FLUSH interval.

- A new turn when a budget is used up: `BudgetSpent` (HTTP 429 with Retry-After), before
  anything is stored.
- A model call when the token budget is used up ends the turn: `BudgetExceeded`, the steps that
  ran kept in its result. The first call of a new turn looks at the action budget too.
- An action when the action budget is used up is answered "refused: budget" (the model can tell
  the person) and counted in `usage_daily.refusals`. A step a person approved is their explicit
  decision: it runs, and counts, whatever the budget says.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncConnection

from pressloop.clock import Now
from pressloop.config import Settings
from pressloop.contracts import ActionContext, Usage
from pressloop.errors import BudgetExceeded, BudgetSpent
from pressloop.observability.metrics import Metrics
from pressloop.providers.base import (
    ModelRequest,
    ModelResponse,
    Provider,
    StreamPart,
    WrappedProvider,
)
from pressloop.runtime.budgets import (
    ACTIONS,
    TOKENS,
    Refusal,
    Subject,
    Used,
    budget_refusal,
    budget_subjects,
    site_subject,
    stored_use,
    usage_rows,
)
from pressloop.runtime.outcome import minus
from pressloop.runtime.session import RunSession
from pressloop.runtime.turn_reads import TurnReads
from pressloop.runtime.usage_buffer import UsageBuffer
from pressloop.store.db import Database
from pressloop.store.records import RunRecord


class Counting(Protocol):
    """Where a process counts usage (the runner)."""

    @property
    def database(self) -> Database: ...

    @property
    def settings(self) -> Settings: ...

    @property
    def usage(self) -> UsageBuffer: ...

    @property
    def sessions(self) -> dict[str, RunSession]: ...

    @property
    def now(self) -> Now: ...

    @property
    def metrics(self) -> Metrics: ...


async def used_today(
    conn: AsyncConnection, counting: Counting, user: str | None, *, reads: TurnReads | None = None
) -> dict[Subject, Used]:
    """Today's use of the site's and `user`'s budgets, as this process knows it. `reads`: the
    day's counters as this transaction read them already (if they are `user`'s of today)."""
    settings, day = counting.settings, counting.now().date().isoformat()
    if reads is not None and reads.user == user and reads.day == day:
        rows = reads.usage
    else:
        rows = await usage_rows(conn, settings, users={user}, day=day)
    used = stored_use(rows)
    for subject in budget_subjects(settings, user):
        used.setdefault(subject, Used()).add(counting.usage.unwritten(day, *subject))
    for session in list(counting.sessions.values()):
        run, checkpoint = session.claim.run, session.last_checkpoint
        if checkpoint is None:
            continue
        live = minus(checkpoint.usage, run.usage)
        used[("site", site_subject(settings))].add(live)
        if user and run.requesting_user == user:
            used[("user", user)].add(live)
    return used


def count_refusal(counting: Counting, user: str | None) -> None:
    """Count a refusal in today's `usage_daily.refusals` of the user and the site (written
    with the process's next usage flush, never in the refused request's transaction)."""
    counting.usage.add(
        day=counting.now().date().isoformat(),
        subjects={"user": user or "anonymous", "site": site_subject(counting.settings)},
        usage=Usage(),
        runs=0,
        refusals=1,
    )


async def refuse_new_turn(
    conn: AsyncConnection, counting: Counting, *, user: str | None, reads: TurnReads | None = None
) -> None:
    """Raise `BudgetSpent` (429) if a budget of `user` or the site is used up: checked before
    a new turn is stored."""
    used = await used_today(conn, counting, user, reads=reads)
    refusal = budget_refusal(used, counting.settings, user, now=counting.now())
    if refusal is not None:
        count_refusal(counting, user)
        counting.metrics.budget_refused("new_turn")
        raise BudgetSpent(
            f"{refusal.message}. Nothing was started.", retry_after_s=refusal.retry_after_s
        )


@dataclass(kw_only=True)
class RunBudget:
    """One run's checks: the executor's `BudgetPort`, and the guard of its model calls."""

    counting: Counting
    run: RunRecord
    _calls: int = field(default=0, init=False)

    async def refusal(self, kinds: frozenset[str]) -> Refusal | None:
        settings = self.counting.settings
        limits = {
            ACTIONS: settings.budget_user_actions or settings.budget_site_actions,
            TOKENS: settings.budget_user_tokens or settings.budget_site_tokens,
        }
        if not any(limits[kind] for kind in kinds):
            return None  # no budget to keep: no query
        async with self.counting.database.read() as conn:
            used = await used_today(conn, self.counting, self.run.requesting_user)
        return budget_refusal(
            used,
            self.counting.settings,
            self.run.requesting_user,
            now=self.counting.now(),
            kinds=kinds,
        )

    async def action_refusal(self, context: ActionContext) -> str | None:
        refusal = await self.refusal(frozenset({ACTIONS}))
        if refusal is None:
            return None
        count_refusal(self.counting, self.run.requesting_user)
        self.counting.metrics.budget_refused("action")
        return refusal.message

    async def before_model_call(self) -> None:
        """Raise `BudgetExceeded` if the token budget is used up (the first call of a new turn:
        or the action budget)."""
        first = self._calls == 0 and self.run.checkpoint is None
        self._calls += 1
        refusal = await self.refusal(frozenset({ACTIONS, TOKENS}) if first else frozenset({TOKENS}))
        if refusal is not None:
            self.counting.metrics.budget_refused("model_call")
            raise BudgetExceeded(refusal.message)

    def guarded(self, provider: Provider) -> Provider:
        return BudgetedProvider(provider, self.before_model_call)


class BudgetedProvider(WrappedProvider):
    """A provider whose every call first asks `check` (which raises when a budget is spent)."""

    def __init__(self, inner: Provider, check: Callable[[], Awaitable[None]]) -> None:
        super().__init__(inner)
        self.check = check

    async def complete(self, request: ModelRequest) -> ModelResponse:
        await self.check()
        return await self.inner.complete(request)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        await self.check()
        async for part in self.inner.stream(request):
            yield part

"""Claiming runs for this process: the claim and the run's context, read in one transaction.

A claim takes the run's lease (`store/claims.py`) and, in the same transaction, reads what its
turn needs (agent, history, memories, kill switch, budget counters: `runtime/context.py`), so a
turn starts without a read transaction of its own. While the kill switch is on nothing is
claimed: the claim is rolled back and the runs stay queued.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from pressloop.clock import Now, utc_now
from pressloop.config import Settings
from pressloop.runtime.context import RunContext, load_contexts
from pressloop.runtime.kill_switch import SwitchedOff
from pressloop.runtime.turn_reads import TurnReads
from pressloop.store import claims as claim_store
from pressloop.store.db import Database
from pressloop.store.records import Claim


@dataclass(kw_only=True)
class Claimer:
    database: Database
    settings: Settings
    owner: str
    now: Now = utc_now
    history_limit: int = 60
    # Contexts read with their claims, until the runner takes them (by run id: a claim that is
    # never run leaves one entry, replaced if the run is claimed again).
    _contexts: dict[str, RunContext] = field(default_factory=dict, init=False)

    def take_context(self, run_id: str) -> RunContext | None:
        """The context read with this run's claim, once."""
        return self._contexts.pop(run_id, None)

    async def claim_many(self, limit: int) -> list[Claim]:
        """Claim up to `limit` runnable runs, reading their contexts in the same transaction
        (none while the kill switch is on: queued runs wait for it to go off)."""
        now = self.now()
        claims: list[Claim] = []
        try:
            async with self.database.write() as conn:
                claims = await claim_store.claim_runs(
                    conn,
                    owner=self.owner,
                    ttl_s=self.settings.lease_ttl_s,
                    now=now,
                    limit=limit,
                    savepoint=False,
                )
                await self._load_contexts(conn, claims)
                self._refuse_if_switched_off(claims)
        except IntegrityError:  # another worker won a thread: nothing was claimed, try again
            return []
        except SwitchedOff:
            return self._forget(claims)
        return claims

    async def claim(self, run_id: str | None = None) -> Claim | None:
        """Claim this run (or the next runnable one); None if it cannot start now (its thread
        is busy, or the kill switch is on)."""
        claim = None
        try:
            async with self.database.write() as conn:
                claim = await self.claim_in(conn, run_id, savepoint=False)
                self._refuse_if_switched_off([claim] if claim else [])
        except IntegrityError:  # another worker won the thread
            return None
        except SwitchedOff:
            self._forget([claim] if claim else [])
            return None
        return claim

    def _refuse_if_switched_off(self, claims: list[Claim]) -> None:
        """The contexts read with the claims say whether the kill switch is on: if it is, the
        claims are rolled back and the runs stay queued (no statement of its own)."""
        if claims and self._contexts[claims[0].run.id].disabled:
            raise SwitchedOff

    def _forget(self, claims: list[Claim]) -> list[Claim]:
        for claim in claims:
            self._contexts.pop(claim.run.id, None)
        return []

    async def claim_in(
        self,
        conn: AsyncConnection,
        run_id: str | None,
        *,
        savepoint: bool = True,
        reads: TurnReads | None = None,
    ) -> Claim | None:
        """Claim in the caller's transaction (with a savepoint, a lost race leaves it usable).
        The caller has looked at the kill switch (`Service.submit` refuses while it is on).
        `reads`: what the caller's transaction read already of the run's context."""
        claim = await claim_store.claim_run(
            conn,
            owner=self.owner,
            ttl_s=self.settings.lease_ttl_s,
            now=self.now(),
            run_id=run_id,
            savepoint=savepoint,
        )
        if claim is not None:
            await self._load_contexts(conn, [claim], reads=reads)
        return claim

    async def _load_contexts(
        self, conn: AsyncConnection, claims: list[Claim], *, reads: TurnReads | None = None
    ) -> None:
        self._contexts.update(
            await load_contexts(
                conn,
                [c.run for c in claims],
                settings=self.settings,
                day=self.now().date().isoformat(),
                history_limit=self.history_limit,
                reads=reads,
            )
        )

"""Undo: reverse a done `write` or reversible `destructive` step from its ledger snapshot.

The reversal goes through the same policy as any action of that risk (a `deny` refuses it), is
done at most once per step (the ledger row is claimed first), and is recorded as an event on the
run that made the change, so the run's timeline shows it.
"""

from __future__ import annotations

from typing import Any

from pressloop.actions.registry import ActionServices, Registry
from pressloop.clock import Now
from pressloop.contracts import (
    FINAL_RUN_STATUSES,
    Event,
    EventType,
    PolicyMode,
    Risk,
    RunStatus,
    StepStatus,
    Trigger,
)
from pressloop.errors import ActionError, Conflict, NotFound
from pressloop.runtime.site_policies import resolve_run_policy
from pressloop.store import events as event_store
from pressloop.store import ledger as ledger_store
from pressloop.store import runs as run_store
from pressloop.store.db import Database


class Undo:
    def __init__(
        self, database: Database, registry: Registry, services: ActionServices, now: Now
    ) -> None:
        self.database = database
        self.registry = registry
        self.services = services
        self.now = now

    async def _run_status(self, run_id: str) -> RunStatus:
        async with self.database.read() as conn:
            status = await run_store.run_status(conn, run_id)
        assert status is not None  # a ledger entry's run exists (action_ledger.run_id)
        return status

    async def undo(self, entry_id: int, *, by: str | None) -> dict[str, Any]:
        async with self.database.read() as conn:
            entry = await ledger_store.get_entry_by_id(conn, entry_id)
            policy = await resolve_run_policy(conn, Trigger.API)  # the site's defaults too
        if entry is None:
            raise NotFound(f"ledger entry {entry_id} does not exist")
        spec = self.registry.get(entry.action)
        # An outside MCP server's tool (`server.tool`: built-in names have no dot), loaded in
        # this process or not: nothing of Pressloop's can take back what it did.
        server = spec.server if spec is not None else None
        if server is None and spec is None and "." in entry.action:
            server = entry.action.split(".", 1)[0]
        if server is not None:
            raise Conflict(
                f"{entry.action} is a tool of the MCP server {server}: what it did cannot "
                "be undone from Pressloop"
            )
        if spec is None or spec.undo is None:
            raise Conflict(f"{entry.action} cannot be undone")
        run_status = await self._run_status(entry.run_id)
        if run_status not in FINAL_RUN_STATUSES:
            raise Conflict(f"run {entry.run_id} is {run_status.value}; undo once it has ended")
        if entry.outcome is None or entry.outcome.status is not StepStatus.SUCCEEDED:
            raise Conflict(f"step {entry.step_index} of run {entry.run_id} did not succeed")
        if policy.mode_for(Risk(entry.risk)) is PolicyMode.DENY:
            raise Conflict(f"the policy forbids {entry.risk} actions such as undoing {spec.name}")
        async with self.database.write() as conn:
            if not await ledger_store.claim_undo(conn, entry_id):
                raise Conflict(f"step {entry.step_index} of run {entry.run_id} is already undone")
        try:
            result = await spec.undo(entry.snapshot, entry.outcome.data, self.services)
        except ActionError as failure:
            async with self.database.write() as conn:
                await ledger_store.set_undo_state(conn, entry_id, None)  # may be tried again
            raise Conflict(f"undo of {spec.name} failed: {failure.message}") from failure
        async with self.database.write() as conn:
            await ledger_store.set_undo_state(conn, entry_id, "undone")
            seq = await run_store.next_event_seq(conn, entry.run_id)
            await event_store.append_events(
                conn,
                [
                    Event(
                        run_id=entry.run_id,
                        thread_id=entry.thread_id,
                        seq=seq,
                        type=EventType.RESULT,
                        ts=self.now(),
                        data={
                            "index": entry.step_index,
                            "status": "undone",
                            "message": f"undone by {by or 'someone'}: {result.summary}",
                            "ledger_id": entry_id,
                        },
                    )
                ],
            )
        return {
            "ledger_id": entry_id,
            "action": entry.action,
            "undone": True,
            "summary": result.summary,
        }

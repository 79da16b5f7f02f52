"""Site-wide policy defaults per trigger, kept in the settings table (changed without a restart).

One setting per trigger (`policy.trigger.chat`, ...) holding only the fields a person changed,
so the built-in defaults (`policy.TRIGGER_DEFAULTS`) still apply to the rest and a change to one
trigger never overwrites another. Every run takes its policy from `resolve_run_policy` when it
is created: built-in -> site -> agent -> thread -> request (which only tightens).

For the API and the UI: `trigger_defaults(conn)` reads them all, `set_trigger_defaults(conn,
trigger, changes, now=...)` replaces one trigger's changes (None or {} resets it), validated with
the Policy model (`InvalidRequest` names each problem).

`caller_request(conn, thread_id, caller, request)`: the request layer that keeps a run no looser
than the caller's own trigger's policy on that thread (see `pressloop/policy.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from pressloop.contracts import Policy, Trigger
from pressloop.errors import InvalidRequest
from pressloop.policy import TRIGGER_DEFAULTS, resolve_policy, site_override
from pressloop.store import agents as agent_store
from pressloop.store import settings_repo
from pressloop.store import threads as thread_store

PREFIX = "policy.trigger."
SITE_POLICY_KEYS = [PREFIX + trigger.value for trigger in Trigger]


def _trigger(name: Trigger | str) -> Trigger:
    try:
        return Trigger(name)
    except ValueError:
        known = ", ".join(t.value for t in Trigger)
        raise InvalidRequest(f"unknown trigger {name!r}: one of {known}") from None


async def site_policies(conn: AsyncConnection) -> dict[str, dict[str, Any]]:
    """Each trigger's stored changes ({"heartbeat": {"destructive": "deny"}}); unchanged
    triggers are left out."""
    return site_policies_of(await settings_repo.get_settings(conn, SITE_POLICY_KEYS))


def site_policies_of(stored: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """`site_policies` from settings already read (keys beyond the policies' are ignored)."""
    return {
        key.removeprefix(PREFIX): dict(value)
        for key, value in stored.items()
        if key in SITE_POLICY_KEYS and isinstance(value, Mapping) and value
    }


async def resolve_run_policy(
    conn: AsyncConnection,
    trigger: Trigger,
    *,
    agent: Mapping[str, Any] | None = None,
    thread: Mapping[str, Any] | None = None,
    request: Mapping[str, Any] | None = None,
    stored: Mapping[str, Any] | None = None,
) -> Policy:
    """The policy a new run of `trigger` gets, the site's defaults included. `stored`: the
    site policies' settings, already read in this transaction (`turn_reads.py`)."""
    site = site_policies_of(stored) if stored is not None else await site_policies(conn)
    return resolve_policy(trigger, site=site, agent=agent, thread=thread, request=request)


async def caller_request(
    conn: AsyncConnection,
    thread_id: str,
    caller: Trigger,
    request: Mapping[str, Any] | None = None,
) -> dict[str, Any] | None:
    """The request layer for a run the `caller` asks for under another trigger: the caller's
    own policy on this thread (site, agent, thread and `request` applied) as a whole set of
    fields. A request layer only tightens, so the run gets, field by field, the stricter of its
    trigger's policy and the caller's. `request` unchanged for a thread that does not exist
    (creating the run says so)."""
    thread = await thread_store.get_thread(conn, thread_id)
    if thread is None:
        return dict(request) if request else None
    agent = await agent_store.get_agent(conn, thread.agent_id)
    own = await resolve_run_policy(
        conn,
        caller,
        agent=agent.policy if agent else None,
        thread=thread.metadata.get("policy"),
        request=request,
    )
    return own.model_dump(mode="json")


async def trigger_defaults(conn: AsyncConnection) -> dict[str, dict[str, Any]]:
    """Per trigger: the site's `changes` and the resulting `policy` (before agent and thread)."""
    site = await site_policies(conn)
    return {
        trigger.value: {
            "changes": site.get(trigger.value, {}),
            "policy": resolve_policy(trigger, site=site).model_dump(mode="json"),
        }
        for trigger in TRIGGER_DEFAULTS
    }


async def set_trigger_defaults(
    conn: AsyncConnection,
    trigger: Trigger | str,
    changes: Mapping[str, Any] | None,
    *,
    now: datetime,
) -> dict[str, Any]:
    """Replace `trigger`'s site-wide changes; the trigger's entry of `trigger_defaults` after."""
    chosen = _trigger(trigger)
    stored = site_override(chosen, changes)
    await settings_repo.set_setting(conn, PREFIX + chosen.value, stored, now=now)
    policy = resolve_policy(chosen, site={chosen.value: stored})
    return {"changes": stored, "policy": policy.model_dump(mode="json")}

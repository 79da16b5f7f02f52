"""Policy profiles per trigger and how they merge (DESIGN.md section 6).

defaults -> trigger -> site -> agent -> thread -> request. The site layer is the per-trigger
defaults a person sets in the settings table (`runtime/site_policies.py` stores them); site,
agent and thread may change a value either way; a request can only tighten (fewer rounds, less
time, a stricter risk mode).

A caller cannot loosen its policy by naming another trigger: a run it asks for under another
trigger than its own gets, field by field, the stricter of the two triggers' policies (deny >
confirm > allow; the smaller limit): the caller's own resolved policy is passed as the request
layer (`runtime/site_policies.caller_request`). Over HTTP only the admin UI's own chat is a
`chat` caller; an API token is an `api` caller whatever trigger it names (`api/runs.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from pressloop.contracts import Policy, PolicyMode, Trigger
from pressloop.errors import InvalidRequest

TRIGGER_DEFAULTS: dict[Trigger, Policy] = {
    Trigger.CHAT: Policy(max_rounds=8, max_calls_per_round=8, wall_time_s=600),
    Trigger.HEARTBEAT: Policy(max_rounds=4, max_calls_per_round=4, wall_time_s=120),
    Trigger.SPAWNED: Policy(
        max_rounds=6, max_calls_per_round=6, wall_time_s=300, destructive=PolicyMode.DENY
    ),
    Trigger.API: Policy(max_rounds=8, max_calls_per_round=8, wall_time_s=600),
    # An outside agent's client: its writes wait for a person too (DESIGN.md section 6).
    Trigger.MCP: Policy(
        max_rounds=8, max_calls_per_round=8, wall_time_s=600, write=PolicyMode.CONFIRM
    ),
    # A parent woken by its child's report, with nobody watching: each wake run is also
    # tightened to the policy of the parent run that spawned the child (`runtime/reports.py`).
    Trigger.WAKE: Policy(max_rounds=6, max_calls_per_round=6, wall_time_s=300),
}

_STRICTNESS = {PolicyMode.ALLOW: 0, PolicyMode.CONFIRM: 1, PolicyMode.DENY: 2}
_LIMITS = ("max_rounds", "max_calls_per_round", "wall_time_s", "max_tokens")
_MODES = ("read", "write", "destructive")


def _override(policy: Policy, changes: Mapping[str, Any] | None) -> Policy:
    if not changes:
        return policy
    try:
        return Policy.model_validate({**policy.model_dump(), **dict(changes)})
    except ValidationError as invalid:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in invalid.errors()
        )
        raise InvalidRequest(f"invalid policy: {problems}") from invalid


def _tighten(policy: Policy, changes: Mapping[str, Any] | None) -> Policy:
    if not changes:
        return policy
    wanted = _override(policy, changes)
    merged = policy.model_dump()
    for name in _LIMITS:
        merged[name] = min(getattr(policy, name), getattr(wanted, name))
    for name in _MODES:
        current, asked = getattr(policy, name), getattr(wanted, name)
        merged[name] = asked if _STRICTNESS[asked] > _STRICTNESS[current] else current
    return Policy.model_validate(merged)


def site_override(trigger: Trigger, changes: Mapping[str, Any] | None) -> dict[str, Any]:
    """One trigger's site-wide changes, checked against the Policy model and normalised (modes
    as their names, numbers as numbers): what the settings table stores. `InvalidRequest`
    names every problem; no changes (None or {}) means the built-in defaults."""
    if not changes:
        return {}
    if not isinstance(changes, Mapping):
        raise InvalidRequest(f"the {trigger.value} policy must be an object of fields to change")
    merged = _override(TRIGGER_DEFAULTS[trigger], changes).model_dump(mode="json")
    return {name: merged[name] for name in changes}


def resolve_policy(
    trigger: Trigger,
    *,
    site: Mapping[str, Any] | None = None,
    agent: Mapping[str, Any] | None = None,
    thread: Mapping[str, Any] | None = None,
    request: Mapping[str, Any] | None = None,
) -> Policy:
    """`site` maps triggers to their site-wide changes ({"heartbeat": {...}}); `agent` and
    `thread` may hold per-trigger maps like it, or flat fields for every trigger."""

    def for_trigger(layer: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
        if not layer:
            return None
        scoped = layer.get(trigger.value)
        if isinstance(scoped, Mapping):
            return scoped
        return {k: v for k, v in layer.items() if k not in {t.value for t in Trigger}}

    policy = TRIGGER_DEFAULTS[trigger]
    scoped = (site or {}).get(trigger.value)
    policy = _override(policy, scoped if isinstance(scoped, Mapping) else None)
    policy = _override(policy, for_trigger(agent))
    policy = _override(policy, for_trigger(thread))
    return _tighten(policy, request)

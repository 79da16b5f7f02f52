"""The system prompt of the catalog the service uses by default, for the local model's saved
prompt state (`pressloop.providers.local.prompt_state`).

Built here, above the runtime, because it needs the whole catalog (the built-in actions, the
WordPress pack and PRESSLOOP_ACTION_PACKS, as `pressloop serve` has them with its site) and the
engine's prompt; the provider and its model process only ever receive the text.
"""

from __future__ import annotations

from pressloop.actions.registry import Registry
from pressloop.contracts import DecisionProtocol
from pressloop.engine.ports import PromptContext
from pressloop.engine.prompt import system_prompt
from pressloop.runtime.wiring import default_actions


def default_system_prompt(action_packs: str) -> str:
    """The system prompt the service's engine builds for the default catalog, before any site
    context, memory or conversation (the stable part the local model saves comes first)."""
    entries = Registry(default_actions(action_packs, wordpress=True)).catalog()
    return system_prompt(PromptContext(), entries, DecisionProtocol.JSON)

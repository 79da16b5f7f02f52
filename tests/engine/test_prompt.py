"""The system prompt: stable sections first (so providers can cache the prefix), capped memory."""

from __future__ import annotations

from pressloop.contracts import DecisionProtocol
from pressloop.engine.ports import PromptContext
from pressloop.engine.prompt import memory_context, system_prompt
from tests.support.actions import Notebook


def test_system_prompt_keeps_stable_sections_first() -> None:
    catalog = Notebook().registry().catalog()
    prompt = system_prompt(
        PromptContext(
            instructions="Be brief.",
            agent_files={"SOUL.md": "Kind.", "AGENTS.md": "Rules."},
            site_context="Site: Example",
            memory_context="- likes teal",
            conversation_context="earlier: hi",
        ),
        catalog,
        DecisionProtocol.TOOLS,
    )
    order = [
        "Be brief.",
        "## ACTION_CATALOG",
        "## AGENTS.md",
        "## SOUL.md",
        "## SITE_CONTEXT",
        "## MEMORY_CONTEXT",
        "## CONVERSATION_CONTEXT",
    ]
    positions = [prompt.index(marker) for marker in order]
    assert positions == sorted(positions)
    assert "note (risk: write)" in prompt and "wipe (risk: destructive)" in prompt


def test_memory_context_is_capped_at_8_items_and_1200_chars() -> None:
    assert memory_context([f"fact {i}" for i in range(20)]).count("\n") == 7
    long = memory_context(["x" * 500] * 8)
    assert len(long) <= 1200 and long.count("- ") == 3

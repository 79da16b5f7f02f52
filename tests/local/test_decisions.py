"""The issue's decision smoke set against the real local model: the right action (or none) for
10 requests, each answer valid against the decision schema, on a small catalog and on the
WordPress pack's real catalog."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from pressloop.actions.registry import Registry
from pressloop.actions.wordpress import WORDPRESS_ACTIONS
from pressloop.contracts import CatalogEntry, DecisionProtocol, Message, Role
from pressloop.engine.decision_parser import decision_schema, parse_json_decision
from pressloop.engine.ports import PromptContext
from pressloop.engine.prompt import system_prompt
from pressloop.providers.base import ModelRequest
from pressloop.providers.local.provider import LocalProvider
from pressloop.runtime.wiring import default_actions
from tests.local.conftest import MODEL_TEST_TIMEOUT_S

# (request, the action expected first; None: answer without acting)
SMOKE_SET: list[tuple[str, str | None]] = [
    ("Create a draft post titled Spring opening hours", "create_post"),
    ("Delete the user with the email bob@example.com", "delete_user"),
    ("List the installed plugins", "list_plugins"),
    ("Which users are editors on this site?", "list_users"),
    ("Change the title of post 12 to Our new menu", "update_post"),
    ("Set post 7 back to draft", "update_post"),
    ("What's the weather like in Paris today?", None),
    ("Tell me a joke", None),
    ("Write a new blog post called Summer recipes and keep it as a draft", "create_post"),
    ("Show me which plugins are active", "list_plugins"),
]
SMALL = ("create_post", "update_post", "delete_user", "list_plugins", "list_users", "list_posts")


def catalog(names: tuple[str, ...] | None) -> list[CatalogEntry]:
    specs = [s for s in WORDPRESS_ACTIONS if names is None or s.name in names]
    return Registry(specs).catalog()


async def decide(
    provider: LocalProvider, entries: list[CatalogEntry], text: str
) -> tuple[str | None, bool, str]:
    """(first action or None, schema-valid, raw answer) for one request, as the engine asks."""
    schema = decision_schema([(e.name, e.params_schema) for e in entries])
    request = ModelRequest(
        system=system_prompt(PromptContext(), entries, DecisionProtocol.JSON),
        messages=[Message(role=Role.USER, content=text)],
        response_schema=schema,
    )
    response = await provider.complete(request)
    assert provider.last is not None
    raw = provider.last.text  # before any fallback: what the model itself produced
    try:
        jsonschema.validate(json.loads(raw, strict=False), schema)
        valid = True
    except (ValueError, jsonschema.ValidationError):
        valid = False
    decision = parse_json_decision(response.text)
    return (decision.actions[0].name if decision.actions else None), valid, raw


async def run_smoke_set(provider: LocalProvider, entries: list[CatalogEntry]) -> None:
    rows: list[dict[str, Any]] = []
    for text, expected in SMOKE_SET:
        action, valid, raw = await decide(provider, entries, text)
        rows.append({"request": text, "expected": expected, "got": action, "valid": valid})
        rows[-1]["answer"] = raw[:300]
    right = sum(r["expected"] == r["got"] for r in rows)
    valid = sum(r["valid"] for r in rows)
    report = json.dumps(rows, indent=1)
    assert valid == len(SMOKE_SET), f"{valid}/10 schema-valid answers:\n{report}"
    assert right >= 9, f"{right}/10 right actions:\n{report}"


@pytest.mark.timeout(MODEL_TEST_TIMEOUT_S)
async def test_smoke_set_on_a_small_catalog(local_provider: LocalProvider) -> None:
    await run_smoke_set(local_provider, catalog(SMALL))


@pytest.mark.timeout(MODEL_TEST_TIMEOUT_S)
async def test_smoke_set_on_the_wordpress_catalog(local_provider: LocalProvider) -> None:
    await run_smoke_set(local_provider, catalog(None))


@pytest.mark.timeout(MODEL_TEST_TIMEOUT_S)
async def test_an_answer_cut_off_by_max_tokens_becomes_a_clear_reply_without_actions(
    local_provider: LocalProvider,
) -> None:
    entries = catalog(None)
    request = ModelRequest(
        system=system_prompt(PromptContext(), entries, DecisionProtocol.JSON),
        messages=[Message(role=Role.USER, content="Write a long post about the history of tea")],
        response_schema=decision_schema([(e.name, e.params_schema) for e in entries]),
        max_output_tokens=8,
    )
    response = await local_provider.complete(request)
    assert local_provider.last is not None and local_provider.last.completion_tokens <= 8
    decision = parse_json_decision(response.text)
    assert decision.actions == []
    assert "could not produce a usable answer" in decision.reply


async def test_the_grammar_of_every_action_is_accepted_by_llama_cpp(
    local_provider: LocalProvider,
) -> None:
    # Every built-in action and the whole WordPress pack in one decision grammar: llama.cpp
    # parses it (a grammar it refused would crash the process at sampling time).
    entries = Registry(default_actions(wordpress=True)).catalog()
    await local_provider.check_grammar(
        decision_schema([(e.name, e.params_schema) for e in entries])
    )


async def mcp_entries() -> list[CatalogEntry]:
    """The toolbox test server's real tools (over stdio), as the catalog lists MCP tools."""
    from pressloop.mcp import McpConnection, server_specs
    from tests.mcp.support import stdio_toolbox

    connection = McpConnection(stdio_toolbox(name="box", timeout_s=30))
    try:
        return Registry(await server_specs(connection)).catalog()
    finally:
        await connection.close()


@pytest.mark.timeout(MODEL_TEST_TIMEOUT_S)
async def test_mcp_tools_are_in_the_grammar_and_the_model_picks_one(
    local_provider: LocalProvider,
) -> None:
    # MCP tools (dotted names, schemas their servers wrote) beside the WordPress pack: llama.cpp
    # takes the grammar, and a request that names the tool gets it, with valid params.
    entries = catalog(SMALL) + await mcp_entries()
    assert any(e.server == "box" for e in entries)
    await local_provider.check_grammar(
        decision_schema([(e.name, e.params_schema) for e in entries])
    )
    prompt = system_prompt(PromptContext(), entries, DecisionProtocol.JSON)
    assert "## MCP_TOOL_CATALOG" in prompt and "- box.lookup (risk: read)" in prompt
    action, valid, raw = await decide(
        local_provider, entries, "Use the box lookup tool to look up the term 'plugins'"
    )
    assert valid, raw
    assert action == "box.lookup", raw

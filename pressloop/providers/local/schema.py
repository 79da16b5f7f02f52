"""The decision schema as the local model's grammar sees it, and checking what it produced.

The engine's decision schema (`engine.decision_parser.decision_schema`) already has one `anyOf`
branch per action (`action` as a `const`, its params schema, `additionalProperties: false`) and
a `maxLength` on every string. For a grammar two more things matter:
- every object is closed (`additionalProperties: false`): an open object lets the model invent
  keys, and the grammar converter then allows any value under any name;
- no string may be longer than the answer can be. A grammar does not stop a `max_tokens`
  cut-off, and a `maxLength` of 200,000 would expand into a huge grammar; strings are capped at
  `STRING_CAP` characters, so a whole decision (thought, params, reply) fits in
  `local_max_tokens` tokens.
"""

from __future__ import annotations

import json
from typing import Any

STRING_CAP = 600
# The decision's `thought`: a small model fills whatever room it has, and every character is
# generation time on 2 cores; a sentence is enough to steer the action that follows.
THOUGHT_CAP = 120
# Keys that only document a schema: the grammar ignores them, so they are dropped.
_DOC_KEYS = frozenset({"title", "description", "examples", "default"})
_SCHEMA_MAPS = frozenset({"properties", "$defs", "definitions", "patternProperties"})


def grammar_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of `schema` with every object closed and every string capped."""
    tightened = _tighten(schema)
    assert isinstance(tightened, dict)
    thought = tightened.get("properties", {}).get("thought")
    if isinstance(thought, dict) and thought.get("type") == "string":
        thought["maxLength"] = min(int(thought.get("maxLength", THOUGHT_CAP)), THOUGHT_CAP)
    return tightened


def _tighten(node: Any) -> Any:
    if isinstance(node, list):
        return [_tighten(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DOC_KEYS:
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: _tighten(sub) for name, sub in value.items()}
        elif key in ("enum", "const"):
            out[key] = value
        else:
            out[key] = _tighten(value)
    if out.get("type") == "object" and "additionalProperties" not in out:
        out["additionalProperties"] = False
    kind = out.get("type")
    if kind == "string" or (isinstance(kind, list) and "string" in kind):
        out["maxLength"] = min(int(out.get("maxLength", STRING_CAP)), STRING_CAP)
        if "minLength" in out:
            out["minLength"] = min(int(out["minLength"]), out["maxLength"])
    return out


def action_names(schema: dict[str, Any]) -> set[str]:
    """The action names the decision schema allows (the `const` of each `anyOf` branch)."""
    items = schema.get("properties", {}).get("actions", {}).get("items", {})
    names: set[str] = set()
    for branch in items.get("anyOf", []):
        const = branch.get("properties", {}).get("action", {}).get("const")
        if isinstance(const, str):
            names.add(const)
    return names


def problem_with(text: str, allowed: set[str]) -> str | None:
    """Why `text` is not a usable decision, or None when it is one.

    The grammar makes every complete answer valid; what it cannot prevent is an answer cut off
    by `max_tokens`, so this reads it leniently (raw newlines in strings are fine) and checks
    the shape the engine needs.
    """
    try:
        value = json.loads(text, strict=False)
    except json.JSONDecodeError as exc:
        return f"the answer is not complete JSON ({exc.msg})"
    if not isinstance(value, dict):
        return "the answer is not a JSON object"
    actions = value.get("actions", [])
    if not isinstance(actions, list):
        return "`actions` is not a list"
    for item in actions:
        if not isinstance(item, dict) or not isinstance(item.get("params", {}), dict):
            return "an action is not an object with params"
        if item.get("action") not in allowed:
            return f"the action {item.get('action')!r} is not in the catalog"
    return None


def fallback_answer(problem: str) -> str:
    """A clear `none` decision for an answer that could not be used."""
    return json.dumps(
        {
            "thought": f"unusable local model answer: {problem}"[:200],
            "actions": [],
            "reply": (
                "Sorry, I could not produce a usable answer to that (the local model's answer "
                f"was incomplete: {problem}). Please ask again, more simply or in smaller steps."
            ),
            "confidence": 0,
        }
    )

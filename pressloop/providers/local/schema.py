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
# generation time on 2 cores (about 7 tokens a second under the grammar); a short sentence is
# enough to steer the action that follows.
THOUGHT_CAP = 60
# The reply of a decision that acts: what the person sees while the actions run ("Publishing
# it."). The answer comes after the results (from them, or from the model's next decision).
ACTING_REPLY_CAP = 32
# Decision keys the engine does not use, left out of the local grammar: each is generation time
# (`"confidence": 0.9` is 7 tokens, a second on 2 cores, in every decision).
UNUSED_KEYS = ("confidence",)
# Keys that only document a schema: the grammar ignores them, so they are dropped.
_DOC_KEYS = frozenset({"title", "description", "examples", "default"})
_SCHEMA_MAPS = frozenset({"properties", "$defs", "definitions", "patternProperties"})


def grammar_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of `schema` with every object closed and every string capped."""
    tightened = _tighten(schema)
    assert isinstance(tightened, dict)
    properties = tightened.get("properties", {})
    thought = properties.get("thought")
    if isinstance(thought, dict) and thought.get("type") == "string":
        thought["maxLength"] = min(int(thought.get("maxLength", THOUGHT_CAP)), THOUGHT_CAP)
    if "actions" in properties:  # the decision itself, not some other schema
        for key in UNUSED_KEYS:
            properties.pop(key, None)
        if isinstance(tightened.get("required"), list):
            tightened["required"] = [k for k in tightened["required"] if k not in UNUSED_KEYS]
    return _acting_or_talking(tightened)


def _acting_or_talking(schema: dict[str, Any]) -> dict[str, Any]:
    """The decision as two shapes: no actions and a reply of any length, or actions and a
    short reply (`ACTING_REPLY_CAP`). Generation time is the local model's cost; a reply it
    writes beside its actions is a progress line, not the answer."""
    properties = schema.get("properties", {})
    actions, reply = properties.get("actions"), properties.get("reply")
    if not isinstance(actions, dict) or not isinstance(reply, dict) or not actions.get("items"):
        return schema
    frame = {k: v for k, v in schema.items() if k != "$defs"}
    talking = {**frame, "properties": {**properties, "actions": {"type": "array", "maxItems": 0}}}
    short = {
        **reply,
        "maxLength": min(int(reply.get("maxLength", ACTING_REPLY_CAP)), ACTING_REPLY_CAP),
    }
    acting = {
        **frame,
        "properties": {**properties, "actions": {**actions, "minItems": 1}, "reply": short},
    }
    split: dict[str, Any] = {"anyOf": [talking, acting]}
    if "$defs" in schema:
        split["$defs"] = schema["$defs"]
    return split


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


def action_branches(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each action the decision schema allows (the `const` of an `actions` item branch) and
    its params schema, whether the decision is one shape or split (`_acting_or_talking`)."""
    frames = schema.get("anyOf", [schema]) if "properties" not in schema else [schema]
    found: dict[str, dict[str, Any]] = {}
    for frame in frames:
        items = frame.get("properties", {}).get("actions", {}).get("items", {})
        for branch in items.get("anyOf", []):
            properties = branch.get("properties", {})
            const = properties.get("action", {}).get("const")
            if isinstance(const, str):
                found[const] = properties.get("params", {})
    return found


def action_names(schema: dict[str, Any]) -> set[str]:
    """The action names the decision schema allows."""
    return set(action_branches(schema))


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

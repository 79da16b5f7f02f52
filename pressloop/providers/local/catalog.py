"""A shorter ACTION_CATALOG for the local model: params as one-line signatures.

The engine lists each action's params as its full JSON schema, about 8,000 tokens for the
WordPress pack. A cloud model reads that in a blink; a 1.5B model on 2 cores reads roughly
50-100 tokens a second, so the first answer would take minutes. Here each `params:` line
becomes a signature such as `{title: string required, status?: "draft"|"publish"}`: the
model still sees every name, type and choice, and the grammar (built from the full schema)
still enforces the rest. The rewrite is deterministic, so the system prompt's stable part
stays identical from turn to turn and llama.cpp's prefix cache keeps hitting.
"""

from __future__ import annotations

import json
import re
from typing import Any

_PARAMS_LINE = re.compile(r"^(  params: )(\{.*\})$", re.MULTILINE)


def compact_catalog(system: str) -> str:
    return _PARAMS_LINE.sub(_compact_line, system)


def _compact_line(match: re.Match[str]) -> str:
    try:
        schema = json.loads(match.group(2))
    except ValueError:
        return match.group(0)
    if not isinstance(schema, dict):
        return match.group(0)
    return match.group(1) + signature(schema, schema.get("$defs", {}))


def signature(schema: dict[str, Any], defs: dict[str, Any]) -> str:
    properties: dict[str, Any] = schema.get("properties", {})
    if not properties:
        return "{}"
    required = set(schema.get("required", []))
    fields = [
        f"{name}{'' if name in required else '?'}: {_type(sub, defs)}"
        for name, sub in properties.items()
    ]
    return "{" + ", ".join(fields) + "}"


def _type(schema: Any, defs: dict[str, Any]) -> str:
    if not isinstance(schema, dict):
        return "any"
    if "$ref" in schema:
        target = defs.get(str(schema["$ref"]).rsplit("/", 1)[-1], {})
        return _type(target, defs)
    if "const" in schema:
        return json.dumps(schema["const"])
    if "enum" in schema:
        return "|".join(json.dumps(v) for v in schema["enum"])
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return "|".join(dict.fromkeys(_type(s, defs) for s in schema[key]))
    kind = schema.get("type")
    if isinstance(kind, list):
        return "|".join(str(k) for k in kind)
    if kind == "array":
        return f"[{_type(schema.get('items', {}), defs)}]"
    if kind == "object":
        return signature(schema, defs) if schema.get("properties") else "object"
    return str(kind or "any")

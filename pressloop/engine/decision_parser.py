"""The JSON decision protocol (DESIGN.md section 3): a model's messy answer -> `Decision`.

Real answers come in code fences and prose, under a container key, with other field names or
with params encoded as a string. `parse_json_decision` accepts all that; its `InvalidModelOutput`
messages are written for the model, which sees them in the engine's corrective retry (followed
by the DECISION_FORMAT of `decision_format.py`).
`decision_schema` is the matching JSON schema for schema-constrained decoding. Pure functions.
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import re
from collections.abc import Iterator, Mapping
from typing import Any

from pressloop.contracts import ActionCall, Decision
from pressloop.errors import InvalidModelOutput

MAX_ACTIONS = 6
THOUGHT_MAX = 200
REPLY_MAX = 2000
PARAM_STRING_MAX = 4000

# Field aliases seen in the wild, canonical name first: the first key present wins.
_ACTION_KEYS = ("action", "action_name", "tool", "function", "command")
_PARAMS_KEYS = ("params", "arguments", "args", "input")
_THOUGHT_KEYS = ("thought", "reasoning", "explanation")
_REPLY_KEYS = ("reply", "message", "answer", "final")
_DECISION_KEYS = frozenset(
    (*_ACTION_KEYS, *_PARAMS_KEYS, *_THOUGHT_KEYS, *_REPLY_KEYS, "actions", "confidence")
)
_CONTAINERS = ("response", "agent", "result", "data")
_MAX_UNWRAP = 3
# Action values that models use to say "nothing to do, here is my answer".
_NO_ACTION = frozenset({"", "none", "null", "final", "reply", "respond", "answer"})
# Where a JSON object can start: `{` then a key or `}`. Keeps prose such as "{braces" or
# "{{ template }}" from swallowing the real object that follows it.
_OBJECT_START = re.compile(r"\{\s*[\"}]")
# What brace matching looks at: a whole JSON string (an unterminated one runs to the end, so a
# truncated answer stays unbalanced), a fence marker with its language tag, or a brace.
_TOKEN = re.compile(r'"(?:\\.|[^"\\])*"?|```[A-Za-z0-9_+.-]*|[{}]', re.DOTALL)

# The problems name what is wrong; the corrective message adds the whole DECISION_FORMAT
# (engine/decision_format.py), the same text the system prompt has.
_ONE_OBJECT = (
    'Put the whole answer in one JSON object: each action as {"action": "<name>", "params": '
    '{...}} in "actions", words for the person in "reply".'
)

# In a params schema: keys whose value maps names to schemas, and keys whose value is data.
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions"})
_LITERAL_KEYS = frozenset({"enum", "const", "default", "examples"})
_LOCAL_DEF_REF = re.compile(r"^#/(?:\$defs|definitions)/")

_MISSING: Any = object()


def parse_json_decision(text: str, *, id_prefix: str = "call") -> Decision:
    """Normalise one JSON-protocol answer into a Decision, or raise `InvalidModelOutput`."""
    obj = _unwrap(_first_object(text))
    calls = _collect_calls(obj)
    reply = _first_str(obj, _REPLY_KEYS).strip()
    if not calls and not reply:
        raise InvalidModelOutput(
            "The JSON object has neither an action nor a reply: set `action` (or `actions`) "
            "to act, or `reply` to answer the person."
        )
    return Decision(
        thought=_first_str(obj, _THOUGHT_KEYS).strip()[:THOUGHT_MAX],
        reply=reply,
        actions=[
            ActionCall(id=f"{id_prefix}_{i}", name=name, params=params)
            for i, (name, params) in enumerate(calls)
        ],
        confidence=_confidence(obj.get("confidence")),
    )


def decision_schema(actions: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """JSON schema of a decision whose `actions` items are one of the given (name, params)."""
    defs: dict[str, Any] = {}
    branches = [
        {
            "type": "object",
            "properties": {"action": {"const": name}, "params": _embed(name, params, defs)},
            "required": ["action", "params"],
            "additionalProperties": False,
        }
        for name, params in actions
    ]
    # "No action" is an empty list; with no actions at all `anyOf: []` would be invalid.
    action_list: dict[str, Any] = {"type": "array", "maxItems": MAX_ACTIONS if branches else 0}
    if branches:
        action_list["items"] = {"anyOf": branches}
    return {
        "type": "object",
        "properties": {
            "thought": {"type": "string", "maxLength": THOUGHT_MAX},
            "actions": action_list,
            "reply": {"type": "string", "maxLength": REPLY_MAX},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        },
        # Required and in this order: grammar-based decoders emit them as listed, so the model
        # thinks before it acts and answers last. `confidence` may be left out: nothing depends
        # on it (read as 0.5), and the local model's grammar leaves it out to save its tokens.
        "required": ["thought", "actions", "reply"],
        "additionalProperties": False,
        **({"$defs": defs} if defs else {}),
    }


# --- finding the object ------------------------------------------------------------------------


def _first_object(text: str) -> dict[str, Any]:
    """The first balanced JSON object that parses; the error names the first problem met."""
    problem: str | None = None
    for candidate in _balanced_objects(text):
        if candidate is None:  # truncated: the scanner yields nothing after it
            problem = problem or "has a JSON object that is cut off (unbalanced braces)"
            break
        try:  # strict=False: models put raw newlines inside strings
            return json.loads(candidate, strict=False)  # type: ignore[no-any-return]
        except json.JSONDecodeError as exc:
            problem = problem or f"has an object that is not valid JSON ({exc.msg}, char {exc.pos})"
    raise InvalidModelOutput(f"The answer {problem or 'contains no JSON object'}. {_ONE_OBJECT}")


def _balanced_objects(text: str) -> Iterator[str | None]:
    """Yield each top-level balanced `{...}` in order; yield None and stop at a truncated one.

    Brace matching skips JSON strings whole (with their escaped quotes and braces). Code fences
    are stripped here rather than up front: outside a string a fence marker is noise, inside one
    it is content (a reply may well quote a code block).
    """
    pos = 0
    while (start := _OBJECT_START.search(text, pos)) is not None:
        depth, pieces, piece_start = 0, [], start.start()
        for token in _TOKEN.finditer(text, start.start()):
            if token[0] == "{":
                depth += 1
            elif token[0] == "}":
                depth -= 1
                if depth == 0:
                    pieces.append(text[piece_start : token.end()])
                    yield "".join(pieces)
                    pos = token.end()
                    break
            elif token[0].startswith("`"):
                pieces.append(text[piece_start : token.start()])
                piece_start = token.end()
        else:
            yield None
            return


def _unwrap(obj: dict[str, Any]) -> dict[str, Any]:
    """Step into `response`/`agent`/`result`/`data` while that is all the object holds."""
    for _ in range(_MAX_UNWRAP):
        if _DECISION_KEYS.intersection(obj):
            break
        inner = [obj[key] for key in _CONTAINERS if isinstance(obj.get(key), dict)]
        if len(inner) != 1:
            break
        obj = inner[0]
    return obj


# --- fields ------------------------------------------------------------------------------------


def _collect_calls(obj: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    top = _call_from(obj, item=False)
    raw_list = obj.get("actions") or []
    if isinstance(raw_list, dict):  # one action given as an object instead of a list
        raw_list = [raw_list]
    if not isinstance(raw_list, list):
        raise InvalidModelOutput("`actions` must be a list of action objects.")
    listed: list[tuple[str, dict[str, Any]]] = []
    for n, item in enumerate(raw_list):
        if not isinstance(item, dict):
            raise InvalidModelOutput(
                f'`actions[{n}]` must be an object like {{"action": "<name>", "params": {{...}}}}.'
            )
        if (call := _call_from(item, item=True)) is not None:
            listed.append(call)
    # Models often repeat the top-level action as the first list item: count it once.
    calls = listed if top is None or listed[:1] == [top] else [top, *listed]
    if len(calls) > MAX_ACTIONS:
        raise InvalidModelOutput(
            f"The answer asks for {len(calls)} actions; at most {MAX_ACTIONS} are allowed in one "
            "answer. Split the plan over several rounds: send the first actions now and the "
            "rest after their results come back."
        )
    return calls


def _call_from(obj: Mapping[str, Any], *, item: bool) -> tuple[str, dict[str, Any]] | None:
    """(name, params) of the action in `obj`, or None when it names no action."""
    # Inside `actions`, OpenAI-style `{"name": ..., "arguments": ...}` is common; at the top
    # level `name` is too likely to be a misplaced parameter to read as an action.
    raw = _pick(obj, (*_ACTION_KEYS, "name") if item else _ACTION_KEYS)
    raw_params = _pick(obj, _PARAMS_KEYS)
    if isinstance(raw, dict):  # {"function": {"name": ..., "arguments": "{...}"}}
        if raw_params is _MISSING:
            raw_params = _pick(raw, _PARAMS_KEYS)
        raw = raw.get("name")
    if raw is _MISSING and item:  # `{"action": "none"}` is skipped, a nameless item is a mistake
        raise InvalidModelOutput(
            f'Each item of `actions` needs an "action" name, got {json.dumps(dict(obj))[:200]}.'
        )
    if raw is _MISSING or raw is None:
        return None
    if not isinstance(raw, str):
        raise InvalidModelOutput(f"`action` must be a string (an action name), got {raw!r}.")
    name = raw.strip()
    if name.lower() in _NO_ACTION:
        return None
    return name, _params(name, raw_params)


def _params(name: str, raw: Any) -> dict[str, Any]:
    if isinstance(raw, str):  # params sent as a JSON-encoded string; plain text stays a str
        with contextlib.suppress(json.JSONDecodeError):
            raw = json.loads(raw, strict=False) if raw.strip() else None
    if raw is _MISSING or raw is None:
        return {}
    if isinstance(raw, dict):
        return raw
    raise InvalidModelOutput(
        f"The params of action {name!r} must be a JSON object of named parameters, "
        f'like "params": {{"title": "Hello"}}, not a list, number or plain text.'
    )


def _confidence(raw: Any) -> float:
    """A number in [0, 1]; anything unreadable means "no opinion", the 0.5 default."""
    value = math.nan
    if isinstance(raw, int | float | str) and not isinstance(raw, bool):
        with contextlib.suppress(ValueError):
            value = float(raw)  # also reads " 0.8 "
    return 0.5 if math.isnan(value) else min(1.0, max(0.0, value))


def _pick(obj: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    """The value of the first key present (even if null), or `_MISSING`."""
    return next((obj[key] for key in keys if key in obj), _MISSING)


def _first_str(obj: Mapping[str, Any], keys: tuple[str, ...]) -> str:
    """The first string value among `keys`; non-strings (e.g. `"final": true`) are skipped."""
    return next((v for key in keys if isinstance(v := obj.get(key), str)), "")


def _embed(action: str, params: dict[str, Any], defs: dict[str, Any]) -> Any:
    """A capped copy of `params`, its `$defs` moved into the root `defs` under the action's name.

    Embedded in the decision schema, a pydantic-style `#/$defs/X` would resolve against the
    decision's root, so the definitions move there and the references follow them.
    """
    prefix = re.sub(r"[^A-Za-z0-9_-]", "_", action)
    capped = _cap_strings(params, prefix)
    for key in ("$defs", "definitions"):
        if isinstance(capped, dict) and isinstance(capped.get(key), dict):
            defs.update({f"{prefix}.{name}": sub for name, sub in capped.pop(key).items()})
    return capped


def _cap_strings(schema: Any, prefix: str) -> Any:
    """A copy of `schema`: strings without `maxLength` get one, `$defs` references are moved."""
    if isinstance(schema, list):
        return [_cap_strings(item, prefix) for item in schema]
    if not isinstance(schema, dict):
        return schema
    capped: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _SCHEMA_MAPS and isinstance(value, dict):  # a parameter may be named "default"
            capped[key] = {name: _cap_strings(sub, prefix) for name, sub in value.items()}
        elif key == "$ref" and isinstance(value, str):
            capped[key] = _LOCAL_DEF_REF.sub(f"#/$defs/{prefix}.", value)
        elif key in _LITERAL_KEYS:
            capped[key] = copy.deepcopy(value)
        else:
            capped[key] = _cap_strings(value, prefix)
    kind = capped.get("type")
    is_string = kind == "string" or (isinstance(kind, list) and "string" in kind)
    if is_string and "maxLength" not in capped:
        capped["maxLength"] = PARAM_STRING_MAX
    return capped

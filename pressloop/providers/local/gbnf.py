"""A GBNF grammar (llama.cpp's grammar format) from the decision's JSON schema.

Why our own: llama-cpp-python's converter spells `maxLength: N` as N nested optional groups,
which llama.cpp refuses above a few hundred characters (and the whole catalog's grammar grows to
a megabyte). GBNF has a bounded repetition `x{0,N}`; with it a string field is one short rule.
The schema subset is what pydantic emits for action params plus the decision's own frame:
objects (closed, properties in declared order), strings (minLength, maxLength, enum, const, a
`^[class]{m,n}$` pattern), integers and numbers, booleans, null, arrays (minItems, maxItems),
`anyOf`, type lists and local `$ref`s. Anything else becomes "any JSON value" of that type.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pressloop.providers.local.grounding import WORDS_KEY

# One JSON string character: anything but a quote, a backslash or a control character, or an
# escape. A `maxLength` counts these, so an escape counts as one character, as in JSON.
_CHAR = r'[^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})'
_BASE = {
    "ws": '" "?',
    "char": _CHAR,
    "string": r'"\"" char* "\"" ws',
    "integer": '"-"? ("0" | [1-9] [0-9]{0,17}) ws',
    "natural": '("0" | [1-9] [0-9]{0,17}) ws',
    "number": '"-"? ("0" | [1-9] [0-9]{0,17}) ("." [0-9]{1,17})? ([eE] [-+]? [0-9]{1,3})? ws',
    "boolean": '("true" | "false") ws',
    "null": '"null" ws',
    "value": "(object | array | string | number | boolean | null)",
    "object": '"{" ws (string ":" ws value ("," ws string ":" ws value)*)? "}" ws',
    "array": '"[" ws (value ("," ws value)*)? "]" ws',
}
# A character that makes a string words rather than an id: not a digit, `#` or a space.
_WORD_CHAR = r'[^"\\\x7F\x00-\x1F0-9# ] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})'
_SIMPLE_PATTERN = re.compile(r"^\^(\[[^\]\\]+\])\{(\d+),(\d+)\}\$$")


class GrammarBuilder:
    def __init__(self, schema: dict[str, Any]) -> None:
        self._root_schema = schema
        self._rules: dict[str, str] = dict(_BASE)
        self._by_body: dict[str, str] = {body: name for name, body in _BASE.items()}
        self._refs: dict[str, str] = {}

    def build(self) -> str:
        root = self._visit(self._root_schema, "root")
        if root != "root":  # a primitive or shared rule: root points at it
            self._rules["root"] = root
        return "\n".join(f"{name} ::= {body}" for name, body in self._rules.items()) + "\n"

    def _rule(self, hint: str, body: str) -> str:
        """The name of a rule with this body (an existing one when the body is the same)."""
        if body in self._by_body:
            return self._by_body[body]
        base = re.sub(r"[^A-Za-z0-9-]+", "-", hint).strip("-").lower() or "r"
        name, n = base, 1
        while name in self._rules:
            n += 1
            name = f"{base}-{n}"
        self._rules[name] = body
        self._by_body[body] = name
        return name

    def _visit(self, schema: Any, hint: str) -> str:
        """A GBNF expression (usually a rule name) matching `schema`."""
        if not isinstance(schema, dict) or not schema:
            return "value"
        if "$ref" in schema:
            return self._ref(str(schema["$ref"]))
        if "const" in schema:
            return self._rule(hint, f"{_literal(schema['const'])} ws")
        if "enum" in schema:
            options = " | ".join(_literal(v) for v in schema["enum"])
            return self._rule(hint, f"({options}) ws")
        for key in ("anyOf", "oneOf"):
            if key in schema:
                names = [self._visit(s, f"{hint}-{i}") for i, s in enumerate(schema[key])]
                return self._rule(hint, " | ".join(dict.fromkeys(names)))
        kind = schema.get("type")
        if isinstance(kind, list):
            names = [self._visit({**schema, "type": k}, f"{hint}-{k}") for k in kind]
            return self._rule(hint, " | ".join(dict.fromkeys(names)))
        if kind == "object":
            return self._object(schema, hint)
        if kind == "array":
            return self._array(schema, hint)
        if kind == "string":
            return self._string(schema, hint)
        if kind == "integer":
            minimum = schema.get("minimum", schema.get("exclusiveMinimum"))
            non_negative = isinstance(minimum, int | float) and minimum >= 0
            return "natural" if non_negative else "integer"
        if isinstance(kind, str) and kind in ("number", "boolean", "null"):
            return kind
        return "value"

    def _ref(self, ref: str) -> str:
        if ref in self._refs:
            return self._refs[ref]
        prefix = "#/$defs/"
        if not ref.startswith(prefix):
            return "value"
        name = ref[len(prefix) :]
        target = self._root_schema.get("$defs", {}).get(name)
        rule = f"def-{re.sub(r'[^A-Za-z0-9-]+', '-', name).lower()}"
        self._refs[ref] = rule
        self._rules[rule] = "value"  # placeholder: a recursive definition may refer to itself
        self._rules[rule] = self._visit(target, f"{rule}-body")
        return rule

    def _string(self, schema: dict[str, Any], hint: str) -> str:
        if schema.get(WORDS_KEY):
            return self._words(schema, hint)
        pattern = _SIMPLE_PATTERN.match(str(schema.get("pattern", "")))
        if pattern:
            char_class, low, high = pattern.groups()
            return self._rule(hint, f'"\\"" {char_class}{{{low},{high}}} "\\"" ws')
        low = int(schema.get("minLength", 0))
        high = schema.get("maxLength")
        if high is None and not low:
            return "string"
        repeat = f"{{{low},{int(high)}}}" if high is not None else f"{{{low},}}"
        return self._rule(hint, f'"\\"" char{repeat} "\\"" ws')

    def _words(self, schema: dict[str, Any], hint: str) -> str:
        """A string that is not a bare number (`grounding.py`): up to a few digits, `#` or
        spaces, then a character that is none of these, then anything."""
        self._rules.setdefault("word-char", _WORD_CHAR)
        high = max(int(schema.get("maxLength", 200)) - 1, 0)
        return self._rule(hint, f'"\\"" [0-9# ]{{0,8}} word-char char{{0,{high}}} "\\"" ws')

    def _array(self, schema: dict[str, Any], hint: str) -> str:
        item = self._visit(schema.get("items", {}), f"{hint}-item")
        low = int(schema.get("minItems", 0))
        high = schema.get("maxItems")
        if high is not None and int(high) == 0:
            return self._rule(hint, '"[" ws "]" ws')
        more_low = max(low - 1, 0)
        more = f"{{{more_low},{int(high) - 1}}}" if high is not None else f"{{{more_low},}}"
        items = f'{item} ("," ws {item}){more}'
        body = f'"[" ws {items} "]" ws' if low > 0 else f'"[" ws ({items})? "]" ws'
        return self._rule(hint, body)

    def _object(self, schema: dict[str, Any], hint: str) -> str:
        properties: dict[str, Any] = schema.get("properties", {})
        if not properties:
            closed = schema.get("additionalProperties") is False
            return self._rule(hint, '"{" ws "}" ws') if closed else "object"
        required = set(schema.get("required", []))
        # In declared order, optional ones included: a model fills `email` before `reassign`
        # when the schema lists it first, instead of closing the object after the required.
        pairs = [
            (f'{_literal(key)} ":" ws {self._visit(sub, f"{hint}-{key}")}', key in required)
            for key, sub in properties.items()
        ]
        return self._rule(hint, f'"{{" ws {self._pairs(pairs, 0, True, hint)} "}}" ws')

    def _pairs(self, pairs: list[tuple[str, bool]], start: int, first: bool, hint: str) -> str:
        """Pairs `start`.. in order, each optional one present or not, commas only between."""
        if start == len(pairs):
            return ""
        pair, needed = pairs[start]
        rest = self._pairs(pairs, start + 1, False, hint)
        present = (pair if first else f'"," ws {pair}') + (f" {rest}" if rest else "")
        if needed:
            body = present
        else:
            skipped = self._pairs(pairs, start + 1, first, hint)
            body = f"({present})" + (f" | {skipped}" if skipped else "")
            body = f"({body})" if skipped else f"({present})?"
        return self._rule(f"{hint}-from-{start}{'-first' if first else ''}", body)


def _literal(value: Any) -> str:
    """A GBNF string literal matching `value` written as JSON."""
    return json.dumps(json.dumps(value, ensure_ascii=False), ensure_ascii=False)


def schema_to_gbnf(schema: dict[str, Any]) -> str:
    return GrammarBuilder(schema).build()

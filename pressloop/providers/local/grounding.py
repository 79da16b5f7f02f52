"""References the local model may write: an id it has seen, or words, never an id it made up.

Every WordPress reference field takes an id or the words a person uses (a title, a login, a
name: `actions/wordpress/refs.py`). A 1.5B model asked to "publish the draft Spring Sale" wrote
`"post": 41` (the id of its worked example) or `123` instead of the title, and the action
failed on a post that does not exist. The grammar now allows, in a reference field, only

- an integer that appears in the conversation (the person's words, earlier answers, action
  results: ids the model has actually been shown), and
- a string with at least one character that is not a digit, `#` or a space (words, which the
  action looks up; "12" or "#12" would be read as an id).

With no id seen yet the field can only be words, so the model writes the title or the name the
person gave, and the lookup finds it (or answers "which one?" with candidates).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from pressloop.contracts import DICTATED
from pressloop.providers.local.schema import action_branches

# The key `gbnf.py` reads on a string schema: words, not a bare number.
WORDS_KEY = "x-pressloop-words"
# Numbers as they stand in text and JSON: not part of a longer word, decimal or date.
_NUMBER = re.compile(r"(?<![\w.\-:/])[1-9][0-9]{0,17}(?![\w.\-:/])")
# The most ids one field offers (the newest seen): a long listing must not grow the grammar.
MAX_SEEN = 200


def seen_ids(texts: Iterable[str]) -> list[int]:
    """The positive integers written in `texts`, newest last, each once (at most MAX_SEEN)."""
    seen: dict[int, None] = {}
    for text in texts:
        for match in _NUMBER.finditer(text):
            number = int(match.group(0))
            seen.pop(number, None)
            seen[number] = None
    return list(seen)[-MAX_SEEN:]


def is_reference(node: dict[str, Any]) -> bool:
    """The schema of a reference field: an id (a positive integer) or a string."""
    branches = node.get("anyOf")
    if not isinstance(branches, list) or len(branches) != 2:
        return False
    kinds = sorted(str(b.get("type")) for b in branches if isinstance(b, dict))
    if kinds != ["integer", "string"]:
        return False
    number = next(b for b in branches if b.get("type") == "integer")
    floor = number.get("exclusiveMinimum", number.get("minimum", -1) - 1)
    return isinstance(floor, int | float) and floor >= 0


def ground_references(schema: dict[str, Any], seen: list[int]) -> dict[str, Any]:
    """A copy of the decision schema whose reference fields take only `seen` ids or words."""
    grounded = _ground(schema, seen)
    assert isinstance(grounded, dict)
    return grounded


def _ground(node: Any, seen: list[int]) -> Any:
    if isinstance(node, list):
        return [_ground(item, seen) for item in node]
    if not isinstance(node, dict):
        return node
    if is_reference(node):
        words = next(b for b in node["anyOf"] if b.get("type") == "string")
        branches: list[dict[str, Any]] = [{**words, WORDS_KEY: True}]
        if seen:
            branches.insert(0, {"enum": list(seen)})
        rest = {k: v for k, v in node.items() if k != "anyOf"}
        return {**rest, "anyOf": branches} if len(branches) > 1 else {**rest, **branches[0]}
    return {key: _ground(value, seen) for key, value in node.items()}


# The key an action's params schema carries when every value it sets is one the person says
# (a setting, a profile field): `drop_unsaid` keeps only those values the person's words hold.
DICTATED_KEY = next(iter(DICTATED))
_SPACES = re.compile(r"\s+")


def _plain(text: str) -> str:
    return _SPACES.sub(" ", text).strip().strip("\"'“”‘’.!").casefold()


def drop_unsaid(text: str, schema: dict[str, Any], said: str) -> str:
    """The decision `text` without the dictated params (settings, profile fields) whose value
    the person's words (`said`) do not contain.

    A 1.5B model filling update_settings for "change the tagline" also wrote a site title,
    an email, a timezone and date formats of its own: each a change nobody asked for. Such a
    value is dropped; what the person named stays (an action left with nothing to change says
    so). References are left alone: the grammar has already grounded them.
    """
    decision = _decision(text)
    if decision is None:
        return text
    actions = decision["actions"]
    branches = action_branches(schema)
    heard = _plain(said)
    dropped = False
    for item in actions:
        if not isinstance(item, dict) or not isinstance(item.get("params"), dict):
            continue
        params_schema = branches.get(str(item.get("action")), {})
        whole = bool(params_schema.get(DICTATED_KEY))
        fields = params_schema.get("properties", {})
        # A value that is only a field's label ("tagline", "title") names the field, not a
        # value: the person said it to say which setting, not what to set it to.
        labels = {_plain(name) for name in fields} | {
            _plain(str(f.get("description", ""))) for f in fields.values() if isinstance(f, dict)
        }
        for key, value in list(item["params"].items()):
            field = fields.get(key, {})
            if not (whole or field.get(DICTATED_KEY)) or is_reference(field):
                continue
            kept = None if _plain(str(value)) in labels else _said_only(value, heard)
            kept = _without_full_stop(kept, said)
            if kept != value:
                dropped = True
                if kept is None:
                    del item["params"][key]
                else:
                    item["params"][key] = kept
    return json.dumps(decision, ensure_ascii=False) if dropped else text


def _without_full_stop(value: Any, said: str) -> Any:
    """A value the person ended their sentence with, without that sentence's full stop: "Set
    the tagline to Fresh bread every morning." asks for "Fresh bread every morning". A full stop
    inside quotes ('... morning.') is the person's and stays."""
    if not isinstance(value, str) or not value.endswith(".") or value.endswith(".."):
        return value
    at = said.find(value)
    if at < 0 or said[at + len(value) : at + len(value) + 1] in ("'", '"', "”", "’"):
        return value
    return value[:-1].rstrip()


def _decision(text: str) -> dict[str, Any] | None:
    """The decision as JSON, if it is one with a list of actions (else it is left as it is)."""
    try:
        decision = json.loads(text, strict=False)
    except json.JSONDecodeError:
        return None
    if not isinstance(decision, dict) or not isinstance(decision.get("actions"), list):
        return None
    return decision


def _said_only(value: Any, heard: str) -> Any:
    """`value` if the person said it, a list cut to the words they said (ids kept: the grammar
    allows only ids the conversation showed), or None."""
    if isinstance(value, list):
        kept = [v for v in value if isinstance(v, int) or _said_only(v, heard) is not None]
        return kept or None
    if isinstance(value, dict):
        return value
    spoken = _plain(str(value).lower() if isinstance(value, bool) else str(value))
    return value if spoken and spoken in heard else None


# A phrase the person put in quotes: 'Ten bread myths', "Menu", “News”. An apostrophe inside a
# word (we're, baker's) opens nothing: a quote opens after a non-word character.
_QUOTED = re.compile(
    r"(?<!\w)'([^'\n]{2,200}?)'(?!\w)|\"([^\"\n]{2,200}?)\"|“([^”\n]{2,200}?)”|‘([^’\n]{2,200}?)’"
)


def quoted_phrases(said: str) -> list[str]:
    """The phrases the person put in quotes, in order."""
    return [next(g for g in match.groups() if g is not None) for match in _QUOTED.finditer(said)]


def whole_quotes(text: str, said: str) -> str:
    """The decision `text` with every string param that is a cut-short quoted phrase of the
    person's (`said`) given whole.

    Asked for "a post titled 'New oven arrived'", a 1.5B model wrote the title "New oven": the
    post was created under a title nobody gave. A value that is the start of exactly one quoted
    phrase, ending at a word boundary, and shorter than it, is that phrase; any other value is
    left as the model wrote it.
    """
    phrases = quoted_phrases(said)
    if not phrases:
        return text
    decision = _decision(text)
    if decision is None:
        return text
    actions = decision["actions"]
    changed = False
    for item in actions:
        params = item.get("params") if isinstance(item, dict) else None
        if not isinstance(params, dict):
            continue
        for key, value in params.items():
            whole = _whole(value, phrases) if isinstance(value, str) else None
            if whole is not None:
                params[key] = whole
                changed = True
    return json.dumps(decision, ensure_ascii=False) if changed else text


def _whole(value: str, phrases: list[str]) -> str | None:
    cut = value.strip()
    if len(cut) < 2:
        return None
    longer = {
        phrase
        for phrase in phrases
        if len(phrase) > len(cut)
        and phrase.casefold().startswith(cut.casefold())
        and not phrase[len(cut)].isalnum()
    }
    if len(longer) != 1 or any(phrase.casefold() == cut.casefold() for phrase in phrases):
        return None
    return longer.pop()


_TYPE_WORDS = {"post": re.compile(r"\bposts?\b"), "page": re.compile(r"\bpages?\b")}


def typed_by_words(text: str, schema: dict[str, Any], said: str) -> str:
    """The decision `text` with the post type the person's words name, where the model left it
    out: asked to "add a Contact us page", a 1.5B model called create_post without `"type":
    "page"` and a post was made. Only when the words name one type ("page" and never "post",
    or the reverse) and the action takes that type; a type the model wrote is kept."""
    heard = said.casefold()
    named = [kind for kind, words in _TYPE_WORDS.items() if words.search(heard)]
    if len(named) != 1:
        return text
    decision = _decision(text)
    if decision is None:
        return text
    actions = decision["actions"]
    branches = action_branches(schema)
    changed = False
    for item in actions:
        params = item.get("params") if isinstance(item, dict) else None
        if not isinstance(params, dict) or "type" in params:
            continue
        field = branches.get(str(item.get("action")), {}).get("properties", {}).get("type", {})
        if named[0] in _choices(field):
            params["type"] = named[0]
            changed = True
    return json.dumps(decision, ensure_ascii=False) if changed else text


def _choices(field: Any) -> list[Any]:
    if not isinstance(field, dict):
        return []
    if "enum" in field:
        return list(field["enum"])
    if "const" in field:
        return [field["const"]]
    return [c for branch in field.get("anyOf", []) for c in _choices(branch)]

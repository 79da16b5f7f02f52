"""Secret params (passwords): found by their schema marker, kept out of everything stored.

A param is secret when its JSON schema says `"secret": true` (declare it with
`Field(json_schema_extra=SECRET_FIELD)`). Its value lives only in memory for the step that uses
it: events, checkpoints, the ledger, approvals, transcripts and logs see `SECRET` instead, and any
text that echoes the value gets it replaced. Pure functions, used by the engine, the executor and
the runtime alike.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

SECRET = "[secret]"
SECRET_FIELD: dict[str, Any] = {"secret": True}


def secret_fields(schema: Mapping[str, Any]) -> list[str]:
    """The top-level params a JSON schema marks secret."""
    properties = schema.get("properties") or {}
    return [name for name, sub in properties.items() if isinstance(sub, dict) and sub.get("secret")]


def secret_values(params: Mapping[str, Any], names: Iterable[str]) -> list[str]:
    """The real values given for secret params (not the redaction mark, not empty)."""
    values = []
    for name in names:
        value = params.get(name)
        if isinstance(value, str) and value and value != SECRET:
            values.append(value)
    return values


def redact(params: Mapping[str, Any], names: Iterable[str]) -> dict[str, Any]:
    """`params` with every secret value given replaced by `SECRET`."""
    hidden = dict(params)
    for name in names:
        if hidden.get(name) is not None:
            hidden[name] = SECRET
    return hidden


def scrub(text: str, values: Iterable[str]) -> str:
    """`text` with every secret value in it replaced by `SECRET`."""
    for value in values:
        if value and value in text:
            text = text.replace(value, SECRET)
    return text


def scrub_data(data: Any, values: list[str]) -> Any:
    """JSON-like `data` with every secret value in its strings replaced (a copy, when needed)."""
    if not values or data is None:
        return data
    written = json.dumps(data, default=str, ensure_ascii=False)
    if not any(value in written for value in values):
        return data
    return _scrub_tree(data, values)


def _scrub_tree(data: Any, values: list[str]) -> Any:
    if isinstance(data, str):
        return scrub(data, values)
    if isinstance(data, Mapping):
        return {key: _scrub_tree(item, values) for key, item in data.items()}
    if isinstance(data, list | tuple):
        return [_scrub_tree(item, values) for item in data]
    return data

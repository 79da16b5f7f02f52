"""A model's text as something that can be stored and sent: no lone surrogates, no NUL.

JSON writes a character beyond the Basic Multilingual Plane (an emoji) as two escapes, a
surrogate pair, and a server that cuts its stream by UTF-16 code units (JavaScript's strings)
may send the two halves in two chunks: each chunk then decodes to half a character. Python
keeps such a half as a lone surrogate, which has no UTF-8: the run's text could not be written
to the database, the turn failed, and its retries asked the model again for the same answer.
A streamed answer's text is therefore cut here before it becomes a delta: a high surrogate that
ends a piece waits for the next piece (whose low surrogate completes it), and whatever is still
unpaired becomes U+FFFD, the replacement character. The stream process cuts a relayed answer
with the same code (`providers.openai_chat.read_chunk`), so its parts stay the engine's deltas.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from pressloop.contracts import ActionCall
from pressloop.providers.base import ModelResponse

REPLACEMENT = "\ufffd"
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def well_formed(text: str) -> str:
    """`text` with each surrogate pair as the character it encodes, any other surrogate as
    U+FFFD, and NUL as U+FFFD too (JSON's `\u0000` is valid, but PostgreSQL stores no NUL, in
    text or in jsonb: the run would fail as with a lone surrogate)."""
    if _UNSTORABLE.search(text) is None:
        return text  # the usual case, at the cost of one scan
    text = text.replace("\x00", REPLACEMENT)
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


class StreamedText:
    """One streamed answer's text, piece by piece, each piece well formed. A high surrogate
    left waiting when the answer ends is half a character with nothing to complete it: it is
    dropped, so the deltas and the whole text stay the same text."""

    def __init__(self) -> None:
        self._held = ""

    def add(self, piece: str) -> str:
        if self._held:
            piece, self._held = self._held + piece, ""
        if piece and "\ud800" <= piece[-1] <= "\udbff":
            piece, self._held = piece[:-1], piece[-1]
        return well_formed(piece)


def well_formed_value(value: Any) -> Any:
    """`value` (decoded JSON: a tool call's arguments) with every string, keys too, well formed:
    JSON's escapes can spell a lone surrogate anywhere, and PostgreSQL refuses one in `jsonb`."""
    if isinstance(value, str):
        return well_formed(value)
    if isinstance(value, dict):
        return {well_formed(str(k)): well_formed_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [well_formed_value(item) for item in value]
    return value


def well_formed_response(response: ModelResponse) -> ModelResponse:
    """A whole answer with every string the model wrote well formed (its text, and its tool
    calls' ids, names and arguments): what is stored of it can be stored."""
    return replace(
        response,
        text=well_formed(response.text),
        tool_calls=[
            ActionCall(
                id=well_formed(call.id),
                name=well_formed(call.name),
                params=well_formed_value(call.params),
            )
            for call in response.tool_calls
        ],
    )

"""A model's text as something that can be stored and sent (`pressloop.storable`), and cut
into deltas the same way by the engine and the stream process.

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

from dataclasses import replace

from pressloop.contracts import ActionCall
from pressloop.providers.base import ModelResponse
from pressloop.storable import storable, storable_value


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
        return storable(piece)


def storable_response(response: ModelResponse) -> ModelResponse:
    """A whole answer with every string the model wrote storable (its text, and its tool calls'
    ids, names and arguments)."""
    return replace(
        response,
        text=storable(response.text),
        tool_calls=[
            ActionCall(
                id=storable(call.id),
                name=storable(call.name),
                params=storable_value(call.params),
            )
            for call in response.tool_calls
        ],
    )

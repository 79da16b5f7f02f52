"""One answer of the local model, as the model process reports it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(kw_only=True, frozen=True)
class Generation:
    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str | None
    seconds: float
    # Of `prompt_tokens`, how many were already evaluated (the prefix llama.cpp kept from the
    # last request or restored): the rest is what this answer paid to read.
    cached_tokens: int = 0

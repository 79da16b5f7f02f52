"""Where a task's seconds went: each local-model answer's prompt (read vs kept), output, time.

The benchmark wraps the shared local provider in `Recording`: every answer's `Generation` is
kept, and the task's line shows them ("2310 tok (2120 kept) -> 48 tok, 6.1 s"), so a slow task
says whether reading the prompt or writing the answer cost the time.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from pressloop.providers.base import ModelRequest, ModelResponse, StreamPart
from pressloop.providers.local.generation import Generation


class Recording:
    """A provider that records the local model's generations; everything else is the inner
    provider's."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.generations: list[Generation] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        response: ModelResponse = await self.inner.complete(request)
        self._keep()
        return response

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        async for part in self.inner.stream(request):
            yield part
        self._keep()

    def _keep(self) -> None:
        last = getattr(self.inner, "last", None)
        if isinstance(last, Generation):
            self.generations.append(last)

    def take(self) -> list[Generation]:
        taken, self.generations = self.generations, []
        return taken


def describe(generations: list[Generation]) -> str:
    return "; ".join(
        f"{g.prompt_tokens} tok ({getattr(g, 'cached_tokens', 0)} kept) -> "
        f"{g.completion_tokens} tok, {g.seconds:.1f} s"
        for g in generations
    )

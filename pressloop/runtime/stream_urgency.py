"""A turn reading a model's stream goes ahead of other work (on `pressloop serve`'s loop).

The tokens of a streamed answer are what a person waits for; the rest of a turn (planning,
actions, commits, its next request) can wait a few milliseconds. While the provider's stream is
read, the turn's task is urgent (`loop_lanes.urgent`): each chunk is read and relayed as soon as
it comes. The request before it was built in the step that started the call, in the normal
lane. The answer is handled in the step that read its end (stepping back into the normal lane
first measured worse: p99 15.6 ms against 10.0 under 450 streams, benchmarks.md section 3o);
the turn's next step waits for its turn (`pacing.py`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from pressloop.providers.base import ModelRequest, ModelResponse, StreamPart, WrappedProvider
from pressloop.runtime.loop_lanes import urgent


class UrgentStreams(WrappedProvider):
    """The inner provider's streams, read as urgent work (a whole answer is nobody's tokens)."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return await self.inner.complete(request)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        with urgent():
            async for part in self.inner.stream(request):
                yield part

"""A turn reading a model's stream goes ahead of other work (on `pressloop serve`'s loop).

The tokens of a streamed answer are what a person waits for; the rest of a turn (planning,
actions, commits, its next request) can wait a few milliseconds. While the provider's stream is
read, the turn's task is urgent (`loop_lanes.urgent`): each chunk is read and relayed as soon as
it comes. The request before it was built in the step that started the call, in the normal
lane. The answer is handled in the step that read its end (stepping back into the normal lane
first measured worse: p99 15.6 ms against 10.0 under 450 streams, benchmarks.md section 3o);
the turn's next step waits for its turn (`pacing.py`).

The events the turn queued before the call go ahead too (`hurry_commit`): a part is sent only
after every event before it, and under load the group commit ran behind the turns by more than
the model took to answer.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from pressloop.providers.base import (
    ModelRequest,
    ModelResponse,
    Provider,
    StreamPart,
    WrappedProvider,
)
from pressloop.runtime.loop_lanes import urgent


class UrgentStreams(WrappedProvider):
    """The inner provider's streams, read as urgent work (a whole answer is nobody's tokens);
    `hurry_commit` is called as a call whose text may be streamed starts."""

    def __init__(self, inner: Provider, hurry_commit: Callable[[], None] = lambda: None) -> None:
        super().__init__(inner)
        self._hurry_commit = hurry_commit

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return await self.inner.complete(request)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        if request.streams_text:
            self._hurry_commit()
        with urgent():
            async for part in self.inner.stream(request):
                yield part

"""Which runs of this process a stream process streams, and their model calls' way through it.

A stream handed over to the stream process (`api/handover.py`, `pressloop.streamer`) registers
its run here while the stream process holds it; the run's streamed model calls then go through
the stream process (`RelayedStreams`), which reads each part of text as it comes and writes it to
the person. The call names where its text goes: after which event, as which part
(`RunSession.text_position`), so the stream process numbers the parts as the engine does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable

from pressloop.providers.base import (
    ModelRequest,
    ModelResponse,
    Provider,
    RelayRoute,
    StreamPart,
    WrappedProvider,
)
from pressloop.runtime.bus import EventBus


class StreamRelays:
    """The runs streamed through the stream process at `relay_url` ('' when there is none)."""

    def __init__(self, relay_url: str, bus: EventBus | None = None) -> None:
        self.relay_url = relay_url.rstrip("/")
        self._bus = bus
        self._watched: dict[str, tuple[str, Callable[[], bool]]] = {}

    @property
    def enabled(self) -> bool:
        return bool(self.relay_url)

    def watch(self, run_id: str, key: str, alive: Callable[[], bool]) -> None:
        """The stream `key` of `run_id` is in the stream process's hands while `alive()`."""
        self._watched[run_id] = (key, alive)
        if self._bus is not None:
            self._bus.streamed_elsewhere(run_id, True)

    def unwatch(self, run_id: str, key: str) -> None:
        if self._watched.get(run_id, ("", None))[0] == key:
            del self._watched[run_id]
            if self._bus is not None:
                self._bus.streamed_elsewhere(run_id, False)

    def route(self, run_id: str, base: int, offset: int) -> RelayRoute | None:
        """The way of `run_id`'s next streamed call, its text placed after event `base` as
        part `offset + 1` on; None when nobody streams the run through the stream process."""
        watched = self._watched.get(run_id)
        if watched is None:
            return None
        key, alive = watched
        return RelayRoute(base_url=f"{self.relay_url}/{key}/{base}/{offset}", alive=alive)


class RelayedStreams(WrappedProvider):
    """A run's streamed calls through the stream process while someone watches it there."""

    def __init__(
        self,
        inner: Provider,
        relays: StreamRelays,
        run_id: str,
        text_position: Callable[[], tuple[int, int]],
    ) -> None:
        super().__init__(inner)
        self._relays = relays
        self._run_id = run_id
        self._text_position = text_position

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return await self.inner.complete(request)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        if request.streams_text:
            route = self._relays.route(self._run_id, *self._text_position())
            if route is not None:
                request = dataclasses.replace(request, relay=route)
        async for part in self.inner.stream(request):
            yield part

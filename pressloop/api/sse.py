"""Run events as Server-Sent Events: `id: <seq>`, `event: <type>`, `data: <the Event as JSON>`.

Events are read from the database (`Service.follow`), so any API process can serve any stream and a
client that reconnects with `Last-Event-ID` gets every later event exactly once. Comment pings keep
proxies from closing a quiet stream; a client that goes away cancels the generator.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request

from pressloop.contracts import EventType, RunStatus
from pressloop.errors import InvalidRequest
from pressloop.runtime.service import Service

SSE_MEDIA_TYPE = "text/event-stream"


class StreamTracker:
    """How many event streams are open now (`idle` is set when none is)."""

    def __init__(self) -> None:
        self.open = 0
        self.idle = asyncio.Event()
        self.idle.set()

    def opened(self) -> None:
        self.open += 1
        self.idle.clear()

    def closed(self) -> None:
        self.open -= 1
        if self.open == 0:
            self.idle.set()


def wants_stream(request: Request) -> bool:
    return SSE_MEDIA_TYPE in request.headers.get("accept", "")


def resume_point(last_event_id: str | None, after: int) -> int:
    """Where a stream starts: after `Last-Event-ID` if the client sent one, else after `after`."""
    if last_event_id is None or not last_event_id.strip():
        return after
    try:
        seq = int(last_event_id)
    except ValueError:
        raise InvalidRequest(
            f"Last-Event-ID must be an event's seq number, not {last_event_id!r}"
        ) from None
    if seq < 0:
        raise InvalidRequest("Last-Event-ID must not be negative")
    return seq


# A stream that ends on a run parked for an approval asks the client (a browser's EventSource
# reconnects on its own, every 3 s by default) to come back this much later instead: nothing
# happens before a person decides, and the decision's events are all there when it returns.
PARKED_RETRY_MS = 15_000


async def _frames(
    service: Service, run_id: str, after: int, tracker: StreamTracker
) -> AsyncIterator[ServerSentEvent]:
    tracker.opened()
    try:
        async for event in service.follow(run_id, after=after):
            parked = (
                event.type is EventType.RUN_FINISHED
                and event.data.get("status") == RunStatus.WAITING_APPROVAL.value
            )
            yield ServerSentEvent(
                data=event.model_dump_json(),
                event=event.type.value,
                id=str(event.seq),
                retry=PARKED_RETRY_MS if parked else None,
            )
    finally:
        tracker.closed()


def event_stream(request: Request, run_id: str, *, after: int) -> EventSourceResponse:
    """Every event of the run after `after`, live, until the run finishes or rests."""
    state = request.app.state
    return EventSourceResponse(
        _frames(state.service, run_id, after, state.streams), ping=state.sse_ping_s
    )

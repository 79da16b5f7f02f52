"""Run events as Server-Sent Events: `id: <seq>`, `event: <type>`, `data: <the Event as JSON>`.

The frames come from `Service.follow`: an event this process commits comes straight off the
in-process bus (`runtime/bus.py`); the database is read to catch up: at the start, after a gap
in the seqs, on a wake-up without events (another process's NOTIFY, a cancel) and when the bus
stays quiet for a poll interval. So any API process can serve any stream, for a run running in
any process, and a client that reconnects with `Last-Event-ID` gets every later event exactly
once. Comment pings keep proxies from closing a quiet stream; a client that goes away cancels
the generator.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import Header
from pydantic import StringConstraints
from pydantic.json_schema import SkipJsonSchema
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request

from pressloop.api.bounds import SEQ_PATTERN
from pressloop.contracts import EventType, RunStatus
from pressloop.runtime.service import Service

SSE_MEDIA_TYPE = "text/event-stream"

# One frame of a stream as OpenAPI describes an event of `text/event-stream` (without 3.2's
# `itemSchema`, `schema` is one event): `data` is the Event as JSON. Comments (the pings) are
# not events.
SSE_EVENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["event", "id", "data"],
    "properties": {
        "event": {"type": "string", "enum": [t.value for t in EventType]},
        "id": {
            "type": "string",
            "pattern": "^[0-9]+$",
            "description": "The event's seq: send it back as Last-Event-ID to resume after it.",
        },
        "data": {
            "type": "string",
            "contentMediaType": "application/json",
            "contentSchema": {"$ref": "#/components/schemas/Event"},
        },
        "retry": {
            "type": "integer",
            "minimum": 0,
            "description": "On a run parked for an approval: reconnect this much later (ms).",
        },
    },
}


def sse_content(description: str) -> dict[str, Any]:
    """An OpenAPI `content` entry for a stream of run events."""
    return {SSE_MEDIA_TYPE: {"schema": {**SSE_EVENT_SCHEMA, "description": description}}}


# Optional, but never null: a header is text (`SkipJsonSchema` keeps null out of the schema).
LastEventId = Annotated[
    Annotated[str, StringConstraints(pattern=SEQ_PATTERN)] | SkipJsonSchema[None],
    Header(
        alias="Last-Event-ID",
        description="With a stream: resume after this event's seq (an EventSource sends it); "
        "a number from 0 to 2147483647.",
    ),
]


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
    """Where a stream starts: after `Last-Event-ID` if the client sent one, else after `after`
    (both bounded by their parameters: `LastEventId`, `after`)."""
    return after if last_event_id is None else int(last_event_id)


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

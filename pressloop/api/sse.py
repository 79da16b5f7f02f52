"""Run events as Server-Sent Events: `id: <position>`, `event: <type>`, `data: <the Event as
JSON>`.

The frames come from `Service.follow`: an event this process commits comes straight off the
in-process bus (`runtime/bus.py`); the database is read to catch up: at the start, after a gap
in the seqs, on a wake-up without events (another process's NOTIFY, a cancel) and when the bus
stays quiet for a poll interval. So any API process can serve any stream, for a run running in
any process, and a client that reconnects with `Last-Event-ID` gets every later event exactly
once. Comment pings keep proxies from closing a quiet stream; a client that goes away cancels
the generator.

The id is the event's seq `N`, except on a text delta sent before its commit (only the process
running the turn sends those): `N.k`, event N and then the first k text delta parts after it
(data `{"delta", "after": N, "part": k}`). Resuming at `N.k`, in any process, skips those parts'
text in the delta events that follow N (a partly sent one comes with the rest of its text,
`"after_part"`); parts never committed (the worker died) are followed by the retry's events,
whole, from its `run.started`.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Header
from pydantic import StringConstraints
from pydantic.json_schema import SkipJsonSchema
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request

from pressloop.api.bounds import EVENT_ID_PATTERN
from pressloop.api.frames import frame
from pressloop.api.sse_now import FrameWriter, WritingEventSourceResponse
from pressloop.contracts import EventType
from pressloop.runtime.bus import Subscription
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
            "pattern": r"^[0-9]+(\.[1-9][0-9]*)?$",
            "description": "Where the stream is: the event's seq `N`, or `N.k` on a text delta "
            "sent before its commit (event N, then k text delta parts). Send it back as "
            "Last-Event-ID to resume after it, on any server.",
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
    Annotated[str, StringConstraints(pattern=EVENT_ID_PATTERN)] | SkipJsonSchema[None],
    Header(
        alias="Last-Event-ID",
        description="With a stream: resume after this frame's id (an EventSource sends it): "
        "a seq from 0 to 2147483647, or `N.k` after a text delta sent before its commit.",
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


@dataclass(frozen=True)
class ResumePoint:
    """Where a stream starts: after event `seq`, and after `parts` text delta parts beyond it."""

    seq: int
    parts: int = 0


def resume_point(last_event_id: str | None, after: int) -> ResumePoint:
    """Where a stream starts: after `Last-Event-ID` if the client sent one, else after `after`
    (both bounded by their parameters: `LastEventId`, `after`)."""
    if last_event_id is None:
        return ResumePoint(after)
    seq, _, parts = last_event_id.partition(".")
    return ResumePoint(int(seq), int(parts or 0))


async def _frames(
    service: Service,
    run_id: str,
    start: ResumePoint,
    tracker: StreamTracker,
    subscription: Subscription | None,
    writer: FrameWriter,
) -> AsyncIterator[ServerSentEvent]:
    tracker.opened()
    try:
        events = service.follow(
            run_id,
            after=start.seq,
            parts=start.parts,
            subscription=subscription,
            # A text delta of a turn running here goes out from the turn's task (`sse_now.py`).
            send_now=lambda event: writer.send_now(frame(event)),
        )
        async for event in events:
            next_frame = frame(event)
            await writer.settled()  # a frame sent from another task is on the wire first
            yield next_frame
        await writer.settled()
    finally:
        tracker.closed()


def event_stream(
    request: Request,
    run_id: str,
    *,
    start: ResumePoint,
    subscription: Subscription | None = None,
) -> EventSourceResponse:
    """Every event of the run after `start`, live, until the run finishes or rests.

    `subscription`: made when the run was submitted, before its first event
    (`Service.submit(follow=True)`): the stream begins without a database read."""
    state = request.app.state
    writer = FrameWriter()
    frames = _frames(state.service, run_id, start, state.streams, subscription, writer)
    if subscription is not None:
        # A response dropped before its body starts never runs the generator's cleanup.
        weakref.finalize(frames, state.service.bus.unsubscribe, run_id, subscription)
    return WritingEventSourceResponse(frames, writer=writer, ping=state.sse_ping_s)

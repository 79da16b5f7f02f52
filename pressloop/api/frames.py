"""An event as an SSE frame: its id (where a reconnect resumes) and, for a run parked for an
approval, when the client should come back.

Apart from `sse.py` so that a stream process (`pressloop/streamer/`) writes the same frames
without importing the HTTP app, the database or the runtime (half its memory, most of its
start-up)."""

from __future__ import annotations

from sse_starlette import ServerSentEvent

from pressloop.contracts import Event, EventType, RunStatus
from pressloop.runtime.bus import DELTA_TYPES

__all__ = ["PARKED_RETRY_MS", "frame", "frame_id"]


def frame_id(event: Event) -> str:
    """The frame's id: the seq `N` of an event (or of the rest of one), `N.k` for a text delta
    sent before its commit (`data.after` = N, `data.part` = k: it may never be committed, so
    its position counts from the last event sent whole)."""
    data = event.data
    if event.type in DELTA_TYPES and data.keys() == {"delta", "after", "part"}:
        return f"{data['after']}.{data['part']}"
    return str(event.seq)


# A stream that ends on a run parked for an approval asks the client (a browser's EventSource
# reconnects on its own, every 3 s by default) to come back this much later instead: nothing
# happens before a person decides, and the decision's events are all there when it returns.
PARKED_RETRY_MS = 15_000


def frame(event: Event, data: str | None = None) -> ServerSentEvent:
    """`data`: the event's JSON when it is at hand already (`event.model_dump_json()`)."""
    parked = (
        event.type is EventType.RUN_FINISHED
        and event.data.get("status") == RunStatus.WAITING_APPROVAL.value
    )
    return ServerSentEvent(
        data=event.model_dump_json() if data is None else data,
        event=event.type.value,
        id=frame_id(event),
        retry=PARKED_RETRY_MS if parked else None,
    )

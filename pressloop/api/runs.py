"""Runs: post a message to a thread (wait, stream or background), list, inspect, follow, control."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials
from pydantic import StringConstraints
from pydantic.json_schema import SkipJsonSchema

from pressloop.api.auth import SESSION_COOKIE, UI_HEADER, Operator, ServiceDep, Viewer, bearer
from pressloop.api.bounds import MAX_INT, Id, IdFilter
from pressloop.api.errors import error_responses
from pressloop.api.handover import run_stream
from pressloop.api.schemas import RunAccepted, RunCreate, RunOut, RunResult
from pressloop.api.sse import (
    LastEventId,
    ResumePoint,
    event_stream,
    resume_point,
    sse_content,
    wants_stream,
)
from pressloop.contracts import Event, RunStatus, Trigger
from pressloop.errors import InvalidRequest
from pressloop.runtime.service_reads import RESTING

router = APIRouter(tags=["runs"])

IdempotencyKey = Annotated[
    Annotated[str, StringConstraints(min_length=1, max_length=200)] | SkipJsonSchema[None],
    Header(alias="Idempotency-Key"),
]


async def caller_trigger(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Trigger:
    """Who is really asking: only the admin UI's own chat (its session cookie and UI header, no
    bearer token) is a person chatting; every API token is a program, `api`."""
    from_ui = SESSION_COOKIE in request.cookies and UI_HEADER.lower() in request.headers
    return Trigger.CHAT if credentials is None and from_ui else Trigger.API


Caller = Annotated[Trigger, Depends(caller_trigger)]


def _json(model: RunResult | RunAccepted, status: int, replayed: bool) -> JSONResponse:
    headers = {"Idempotent-Replayed": "true"} if replayed else None
    return JSONResponse(model.model_dump(mode="json"), status_code=status, headers=headers)


@router.post(
    "/v1/threads/{thread_id}/runs",
    response_model=None,
    responses={
        200: {
            "model": RunResult,
            "description": "mode=wait: the run once it rests. mode=stream: its events as SSE "
            "until it finishes or rests.",
            "content": sse_content("mode=stream: one frame per event of the new run."),
        },
        202: {"model": RunAccepted, "description": "mode=background (or a wait that timed out)."},
        **error_responses(409, 429, 503),
    },
)
async def post_run(
    thread_id: Id,
    body: RunCreate,
    request: Request,
    service: ServiceDep,
    who: Operator,
    caller: Caller,
    idempotency_key: IdempotencyKey = None,
    last_event_id: LastEventId = None,
) -> Response:
    """Send a message to the thread's agent. The same idempotency key gives the same run.

    A caller naming another trigger than its own gets the stricter of both policies, field by
    field: an API token asking for `chat` never gets more than the `api` policy allows."""
    if body.idempotency_key and idempotency_key and body.idempotency_key != idempotency_key:
        raise InvalidRequest("the Idempotency-Key header and the body's idempotency_key differ")
    key = body.idempotency_key or idempotency_key
    start_after = resume_point(last_event_id, 0)
    trigger = Trigger(body.trigger)
    policy = body.policy.model_dump(exclude_none=True) if body.policy else None
    if trigger is not caller:
        policy = await service.caller_policy(thread_id, caller, policy)
    submission = await service.submit(
        thread_id,
        body.message,
        trigger=trigger,
        user=who.name,
        multitask=body.multitask,
        idempotency_key=key,
        policy=policy,
        start_here=True,
        follow=body.mode == "stream" and start_after == ResumePoint(0),
    )
    run, replayed = submission.run, not submission.created
    if replayed and run.input != body.message:
        raise InvalidRequest(
            f"the idempotency key {key!r} was already used on this thread for another message "
            f"(run {run.id})"
        )
    if body.mode == "stream":
        return run_stream(request, run.id, start=start_after, subscription=submission.subscription)
    if body.mode == "background":
        return _json(RunAccepted(run=RunOut.of(run)), 202, replayed)
    run = await service.wait(run.id)
    rested = run.status in RESTING
    result = RunResult(run=RunOut.of(run), result=run.result if rested else None)
    return _json(result, 200 if rested else 202, replayed)


@router.get("/v1/runs")
async def list_runs(
    service: ServiceDep,
    _who: Viewer,
    thread_id: IdFilter = None,
    status: RunStatus | None = None,
    limit: int = Query(default=50, ge=1, le=500),
) -> list[RunOut]:
    runs = await service.list_runs(thread_id=thread_id, status=status, limit=limit)
    return [RunOut.of(r) for r in runs]


@router.get("/v1/runs/{run_id}")
async def show_run(run_id: Id, service: ServiceDep, _who: Viewer) -> RunOut:
    return RunOut.of(await service.get_run(run_id))


@router.get(
    "/v1/runs/{run_id}/events",
    response_model=list[Event],
    responses={
        200: {
            "description": "The events as JSON, or with `Accept: text/event-stream` a live SSE "
            "stream until the run finishes or rests.",
            "content": sse_content("One frame per event, in order."),
        }
    },
)
async def run_events(
    run_id: Id,
    request: Request,
    service: ServiceDep,
    _who: Viewer,
    after: int = Query(default=0, ge=0, le=MAX_INT, description="Only events with a larger seq."),
    limit: int = Query(default=1000, ge=1, le=1000, description="At most this many (JSON)."),
    last_event_id: LastEventId = None,
) -> Response | list[Event]:
    """The run's events: a JSON list, or a live SSE stream with `Accept: text/event-stream`
    (resumed after `Last-Event-ID` when the client sends it)."""
    if wants_stream(request):
        await service.get_run(run_id)  # an unknown run is a 404 before the stream starts
        return event_stream(request, run_id, start=resume_point(last_event_id, after))
    return await service.events(run_id, after=after, limit=limit)


@router.post("/v1/runs/{run_id}/cancel")
async def cancel_run(run_id: Id, service: ServiceDep, _who: Operator) -> RunOut:
    """Cancel a queued or paused run at once. A running one, wherever it runs, stops within a
    second (the model call or action in flight is cancelled; a write cut short is reconciled);
    the answer waits for it (PRESSLOOP_CANCEL_WAIT, 2 s) and says `cancelled`, or `running`
    if it is still stopping."""
    return RunOut.of(await service.cancel(run_id))


@router.post("/v1/runs/{run_id}/requeue", responses=error_responses(409))
async def requeue_run(run_id: Id, service: ServiceDep, _who: Operator) -> RunOut:
    """Give a dead, failed or timed-out run a fresh set of attempts."""
    run = await service.requeue(run_id)
    service.start_run_soon(run.id)
    return RunOut.of(run)

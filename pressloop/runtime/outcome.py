"""What a finished turn means for its run: the next status, a retry with backoff, the transcript
kept in the thread (with Pressloop's notice when the run failed, died or was cancelled), and the
usage it adds (pure functions the runner applies)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from pressloop.backoff import full_jitter
from pressloop.config import Settings
from pressloop.contracts import (
    FINAL_RUN_STATUSES,
    Checkpoint,
    ErrorInfo,
    EventType,
    Message,
    NextAction,
    Role,
    RunStatus,
    Trigger,
    TurnResult,
    TurnStatus,
    Usage,
)
from pressloop.engine.transcript import close_dangling_calls
from pressloop.runtime.notices import cancelled_notice, ended_notice, notice_message
from pressloop.store.records import RunRecord

HEARTBEAT_OK = "HEARTBEAT_OK"
ENDED_EARLY = "not run: the turn ended before this action ran"

TURN_TO_RUN_STATUS = {
    TurnStatus.SUCCEEDED: RunStatus.SUCCEEDED,
    TurnStatus.REQUIRES_APPROVAL: RunStatus.WAITING_APPROVAL,
    TurnStatus.FAILED: RunStatus.FAILED,
    TurnStatus.TIMED_OUT: RunStatus.TIMED_OUT,
    TurnStatus.CANCELLED: RunStatus.CANCELLED,
}


@dataclass(kw_only=True)
class Outcome:
    status: RunStatus
    not_before: datetime | None  # a retry's due time
    attempt: int | None  # a retry's attempt number
    checkpoint: Checkpoint
    transcript: list[Message]  # what the thread keeps of the turn
    event: EventType  # the run's last event: `run.finished`, or `error` for a retry
    event_data: dict[str, object]
    # The result the run keeps: a dead run's is no longer retryable (`next_action: stop`).
    result: TurnResult
    notice: str | None = None  # Pressloop's words for a run that failed, died or was cancelled


def outcome(
    run: RunRecord,
    result: TurnResult,
    checkpoint: Checkpoint | None,
    *,
    settings: Settings,
    now: datetime,
    rand: Callable[[], float],
) -> Outcome:
    status = TURN_TO_RUN_STATUS[result.status]
    not_before = None
    attempt = None
    if result.next_action is NextAction.RESCHEDULE and result.error is not None:
        if run.attempt < run.max_attempts:
            status = RunStatus.QUEUED
            delay = full_jitter(
                run.attempt, base_s=settings.backoff_base_s, cap_s=settings.backoff_cap_s, rand=rand
            )
            not_before = now + timedelta(seconds=delay)
            attempt = run.attempt + 1
        else:
            status = RunStatus.DEAD
            result = no_more_retries(result)
    checkpoint = checkpoint or initial_checkpoint(run)
    notice = ended_notice(status, result.error, result.steps, attempts=run.attempt)
    transcript: list[Message] = []
    if status in FINAL_RUN_STATUSES and not quiet_heartbeat(run, result):
        transcript = close_dangling_calls(checkpoint.messages, ENDED_EARLY)
        transcript += [notice_message(notice)] if notice else []
    finished: dict[str, object] = {"status": status.value, "result": result.model_dump(mode="json")}
    if notice:
        finished["notice"] = notice
    if not_before is not None:
        finished["retry_at"] = not_before.isoformat()
    if status is RunStatus.QUEUED:
        event = EventType.ERROR
        data: dict[str, object] = {
            **(result.error or ErrorInfo(cls="", message="")).model_dump(),
            "retry_at": finished.get("retry_at"),
            "attempt": run.attempt,
        }
    else:
        event, data = EventType.RUN_FINISHED, finished
    return Outcome(
        status=status,
        not_before=not_before,
        attempt=attempt,
        checkpoint=checkpoint,
        transcript=transcript,
        event=event,
        event_data=data,
        result=result,
        notice=notice,
    )


def cancelled_transcript(run: RunRecord) -> list[Message]:
    """What a run cancelled before it ran, or while it waited (for a retry or an approval),
    leaves in its thread: its transcript so far, every call answered, and Pressloop's notice."""
    checkpoint = initial_checkpoint(run)
    notice = cancelled_notice(checkpoint.steps, before=run.status, error=run.error)
    return [*close_dangling_calls(checkpoint.messages, ENDED_EARLY), notice_message(notice)]


def no_more_retries(result: TurnResult) -> TurnResult:
    """A dead run's result: its error is no longer retryable and nothing comes next (a person
    may still requeue it)."""
    error = result.error.model_copy(update={"retryable": False}) if result.error else None
    return result.model_copy(update={"error": error, "next_action": NextAction.STOP})


def quiet_heartbeat(run: RunRecord, result: TurnResult) -> bool:
    """A heartbeat that found nothing to do leaves no message noise in its thread."""
    return (
        run.trigger is Trigger.HEARTBEAT
        and result.status is TurnStatus.SUCCEEDED
        and not result.steps
        and result.assistant_text.strip().strip(".").upper() == HEARTBEAT_OK
    )


def initial_checkpoint(run: RunRecord) -> Checkpoint:
    if run.checkpoint is not None:
        return run.checkpoint
    messages = [Message(role=Role.USER, content=run.input)] if run.input else []
    return Checkpoint(messages=messages)


def minus(total: Usage, before: Usage) -> Usage:
    return Usage(
        input_tokens=max(0, total.input_tokens - before.input_tokens),
        output_tokens=max(0, total.output_tokens - before.output_tokens),
        model_calls=max(0, total.model_calls - before.model_calls),
        action_calls=max(0, total.action_calls - before.action_calls),
    )

"""What the HTTP API accepts and answers (pydantic models, so the OpenAPI schema says it too)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from pressloop.contracts import (
    ErrorInfo,
    Message,
    Multitask,
    PolicyMode,
    TurnResult,
    Usage,
)
from pressloop.store.records import RunRecord, ThreadRecord, TokenRecord

Role = Literal["admin", "operator", "viewer"]
RunMode = Literal["wait", "stream", "background"]


class Request(BaseModel):
    """Request bodies: unknown fields are refused, so a typo is an error, not a silent no-op."""

    model_config = ConfigDict(extra="forbid")


# Threads ---------------------------------------------------------------------------------------


class ThreadCreate(Request):
    title: str = Field(default="", max_length=200)
    metadata: dict[str, Any] = Field(default_factory=dict)


class ThreadOut(BaseModel):
    id: str
    agent_id: str
    parent_id: str | None
    depth: int
    title: str
    status: str
    created_by: str | None
    metadata: dict[str, Any]
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, thread: ThreadRecord) -> ThreadOut:
        return cls(
            id=thread.id,
            agent_id=thread.agent_id,
            parent_id=thread.parent_id,
            depth=thread.depth,
            title=thread.title,
            status=thread.status,
            created_by=thread.created_by,
            metadata=thread.metadata,
            created_at=thread.created_at,
            updated_at=thread.updated_at,
        )


# Runs ------------------------------------------------------------------------------------------


class RunOut(BaseModel):
    id: str
    thread_id: str
    agent_id: str
    trigger: str
    status: str
    input: str | None
    requesting_user: str | None
    attempt: int
    max_attempts: int
    not_before: datetime
    lease_owner: str | None
    lease_expires_at: datetime | None
    idempotency_key: str | None
    multitask: str
    result: TurnResult | None
    usage: Usage
    error: ErrorInfo | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None

    @classmethod
    def of(cls, run: RunRecord) -> RunOut:
        return cls.model_validate(run.public())


class ThreadDetail(BaseModel):
    thread: ThreadOut
    messages: list[Message]
    runs: list[RunOut]
    children: list[ThreadOut]


class PolicyRequest(Request):
    """Request-level policy: it can only tighten the thread's policy, never loosen it."""

    max_rounds: int | None = Field(default=None, ge=1)
    max_calls_per_round: int | None = Field(default=None, ge=1)
    wall_time_s: float | None = Field(default=None, gt=0)
    max_tokens: int | None = Field(default=None, ge=1)
    read: PolicyMode | None = None
    write: PolicyMode | None = None
    destructive: PolicyMode | None = None


class RunCreate(Request):
    message: str = Field(description="What the person says to the agent.")
    mode: RunMode = Field(
        default="wait",
        description="wait: answer when the run rests; stream: SSE of its events; "
        "background: 202 at once.",
    )
    multitask: Multitask = Field(
        default=Multitask.ENQUEUE,
        description="What to do when the thread is busy: reject (409), enqueue, or interrupt.",
    )
    idempotency_key: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="The same key on the same thread returns the same run (also accepted as "
        "the Idempotency-Key header).",
    )
    policy: PolicyRequest | None = None
    trigger: Literal["api", "chat"] = Field(
        default="api",
        description="Who starts the turn: `api` (a program) or `chat` (a person at a console, "
        "such as the admin UI); each trigger has its own policy.",
    )


class RunResult(BaseModel):
    run: RunOut
    result: TurnResult | None


class RunAccepted(BaseModel):
    run: RunOut


# Meta ------------------------------------------------------------------------------------------


class Health(BaseModel):
    status: str
    database: str


class UsageRow(BaseModel):
    day: str
    scope: str
    subject: str
    input_tokens: int
    output_tokens: int
    model_calls: int
    action_calls: int
    runs: int


class TokenCreate(Request):
    name: str = Field(min_length=1, max_length=200)
    role: Role


class TokenOut(BaseModel):
    id: str
    name: str
    role: str
    created_at: datetime
    revoked_at: datetime | None

    @classmethod
    def of(cls, token: TokenRecord) -> TokenOut:
        return cls(
            id=token.id,
            name=token.name,
            role=token.role,
            created_at=token.created_at,
            revoked_at=token.revoked_at,
        )


class TokenCreated(TokenOut):
    token: str = Field(description="The token itself: shown this once, only its hash is kept.")

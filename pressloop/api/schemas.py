"""What the HTTP API accepts and answers (pydantic models, so the OpenAPI schema says it too).

Every request body is a `Request`: unknown fields are refused, numbers are bounded and finite,
and no text in it (keys included) holds what the database cannot store (`api/bounds.py`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)
from pydantic.json_schema import SkipJsonSchema

from pressloop.api.bounds import json_problem
from pressloop.contracts import (
    ErrorInfo,
    Message,
    Multitask,
    PolicyMode,
    RunStatus,
    Trigger,
    TurnResult,
    Usage,
)

Role = Literal["admin", "operator", "viewer"]
RunMode = Literal["wait", "stream", "background"]
# A thread's own status; what it is doing is its runs' status.
ThreadStatus = Literal["idle"]

# Text with at least one character that is not whitespace as Python's str.strip sees it (the
# `\s` of other regex engines differs): the schema of a message that must not be blank.
NOT_BLANK = "[^\t-\r\x1c- \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"


def _not_blank(text: str) -> str:
    if not text.strip():
        raise ValueError("the message is empty")
    return text


NotBlank = Annotated[
    str, AfterValidator(_not_blank), Field(min_length=1, json_schema_extra={"pattern": NOT_BLANK})
]

# The most a policy layer may ask for: far above any sane turn, and small enough for every
# timer and counter the engine keeps.
MAX_ROUNDS = 1000
MAX_CALLS_PER_ROUND = 1000
MAX_WALL_TIME_S = 7 * 86400.0
MAX_TOKENS = 100_000_000


class Request(BaseModel):
    """Request bodies: unknown fields are refused, so a typo is an error, not a silent no-op;
    numbers are finite and text storable, anywhere in the body."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _storable(cls, data: Any) -> Any:
        problem = json_problem(data)
        if problem is not None:
            raise ValueError(problem)
        return data


class RecordOut(BaseModel):
    """An answer made from a record the Service returns, the one way every `...Out` is made:
    `RunOut.of(run)`. Each field is read from the record's attribute of that name, a property
    included (a ledger entry's `fate`); what the answer does not declare stays internal (a
    run's checkpoint and lease token)."""

    model_config = ConfigDict(from_attributes=True)

    @classmethod
    def of(cls, record: object) -> Self:
        return cls.model_validate(record)


# Policies --------------------------------------------------------------------------------------


class PolicyFields(Request):
    """Limits and risk modes of one policy layer; a field left out keeps the layer below."""

    max_rounds: int | None = Field(default=None, ge=1, le=MAX_ROUNDS)
    max_calls_per_round: int | None = Field(default=None, ge=1, le=MAX_CALLS_PER_ROUND)
    wall_time_s: float | None = Field(default=None, gt=0, le=MAX_WALL_TIME_S)
    max_tokens: int | None = Field(default=None, ge=1, le=MAX_TOKENS)
    read: PolicyMode | None = None
    write: PolicyMode | None = None
    destructive: PolicyMode | None = None

    def changes(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)


class PolicyRequest(PolicyFields):
    """Request-level policy: it can only tighten the thread's policy, never loosen it."""


class LayerPolicy(PolicyFields):
    """An agent's or a thread's policy: flat fields for every trigger, or per trigger
    (`{"heartbeat": {"max_rounds": 2}}`); a trigger given its own fields ignores the flat ones."""

    chat: PolicyFields | None = None
    heartbeat: PolicyFields | None = None
    spawned: PolicyFields | None = None
    api: PolicyFields | None = None
    mcp: PolicyFields | None = None


TRIGGER_NAMES = [t.value for t in Trigger]


# Threads ---------------------------------------------------------------------------------------


class ThreadMetadata(Request):
    """Free-form metadata; `policy`, if present, is the thread's policy (admins only)."""

    model_config = ConfigDict(extra="allow")

    # Left out is no policy; null is refused (and is not in the schema).
    policy: LayerPolicy | SkipJsonSchema[None] = Field(
        default=None, description="The thread's policy (only an admin may set one)."
    )

    @field_validator("policy", mode="before")
    @classmethod
    def _an_object(cls, value: Any) -> Any:
        if value is None:  # validators see only what was sent: left out is fine, null is not
            raise ValueError("metadata.policy must be an object")
        return value


class ThreadCreate(Request):
    title: str = Field(default="", max_length=200)
    metadata: ThreadMetadata = Field(default_factory=ThreadMetadata)

    def metadata_dict(self) -> dict[str, Any]:
        """The metadata as sent; a policy without the fields left out or null."""
        data = self.metadata.model_dump(mode="json", exclude_unset=True)
        if self.metadata.policy is not None:
            data["policy"] = self.metadata.policy.model_dump(mode="json", exclude_none=True)
        return data


class ThreadOut(RecordOut):
    id: str
    agent_id: str
    parent_id: str | None
    depth: int
    title: str
    status: ThreadStatus
    created_by: str | None
    metadata: dict[str, Any]
    created_at: datetime
    updated_at: datetime


# Runs ------------------------------------------------------------------------------------------


class RunOut(RecordOut):
    id: str
    thread_id: str
    agent_id: str
    trigger: Trigger
    status: RunStatus
    input: str | None
    requesting_user: str | None
    attempt: int
    max_attempts: int
    not_before: datetime
    lease_owner: str | None
    lease_expires_at: datetime | None
    idempotency_key: str | None
    multitask: Multitask
    result: TurnResult | None
    usage: Usage
    error: ErrorInfo | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


class ThreadDetail(BaseModel):
    thread: ThreadOut
    messages: list[Message]
    runs: list[RunOut]
    children: list[ThreadOut]


class RunCreate(Request):
    message: NotBlank = Field(
        description="What the person says to the agent (not blank; at most "
        "PRESSLOOP_MAX_MESSAGE_CHARS characters, else 413).",
    )
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
    status: Literal["ok"]
    database: Literal["ok"]


class UsageRow(BaseModel):
    day: str
    scope: Literal["user", "site"]
    subject: str
    input_tokens: int
    output_tokens: int
    model_calls: int
    action_calls: int
    runs: int
    refusals: int = Field(description="Turns and actions a daily budget refused.")

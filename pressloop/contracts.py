"""Pure data shared by every layer: what a turn is asked, what it answers, and what it emits.

Nothing here does I/O. Every model is pydantic v2 with keyword-only construction, so fields can be
added later without breaking callers (see DESIGN.md section 2).
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class Contract(BaseModel):
    """Base of every contract: unknown fields are errors, instances are plain data."""

    model_config = ConfigDict(extra="forbid")


class Trigger(StrEnum):
    CHAT = "chat"
    HEARTBEAT = "heartbeat"
    SPAWNED = "spawned"
    API = "api"
    MCP = "mcp"
    # A parent woken by the report of a child it waited for (DESIGN.md section 9).
    WAKE = "wake"


class TurnStatus(StrEnum):
    SUCCEEDED = "succeeded"
    REQUIRES_APPROVAL = "requires_approval"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"


class RunStatus(StrEnum):
    """Durable states of a run (DESIGN.md section 7)."""

    QUEUED = "queued"
    RUNNING = "running"
    WAITING_APPROVAL = "waiting_approval"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"
    DEAD = "dead"


FINAL_RUN_STATUSES = frozenset(
    {
        RunStatus.SUCCEEDED,
        RunStatus.FAILED,
        RunStatus.TIMED_OUT,
        RunStatus.CANCELLED,
        RunStatus.DEAD,
    }
)


class NextAction(StrEnum):
    STOP = "stop"
    CONTINUE = "continue"
    RESCHEDULE = "reschedule"


class Risk(StrEnum):
    READ = "read"
    WRITE = "write"
    DESTRUCTIVE = "destructive"


class PolicyMode(StrEnum):
    ALLOW = "allow"
    CONFIRM = "confirm"
    DENY = "deny"


class Multitask(StrEnum):
    REJECT = "reject"
    ENQUEUE = "enqueue"
    INTERRUPT = "interrupt"


class DecisionProtocol(StrEnum):
    TOOLS = "tools"
    JSON = "json"


class Policy(Contract):
    """Resolved limits and risk modes for one turn (DESIGN.md section 6)."""

    max_rounds: int = Field(default=8, ge=1)
    max_calls_per_round: int = Field(default=8, ge=1)
    wall_time_s: float = Field(default=600.0, gt=0)
    max_tokens: int = Field(default=200_000, ge=1)
    read: PolicyMode = PolicyMode.ALLOW
    write: PolicyMode = PolicyMode.ALLOW
    destructive: PolicyMode = PolicyMode.CONFIRM

    def mode_for(self, risk: Risk) -> PolicyMode:
        return {Risk.READ: self.read, Risk.WRITE: self.write, Risk.DESTRUCTIVE: self.destructive}[
            risk
        ]


class ActionCall(Contract):
    """One action the model asked for. `id` is the provider's tool-call id (or one we made)."""

    id: str
    name: str
    params: dict[str, Any] = Field(default_factory=dict)


class Decision(Contract):
    """What one model answer means, whatever the protocol that carried it."""

    thought: str = Field(default="", max_length=200)
    reply: str = ""
    actions: list[ActionCall] = Field(default_factory=list, max_length=6)
    confidence: float = Field(default=0.5, ge=0.0, le=1.0)

    @field_validator("thought", mode="before")
    @classmethod
    def _clip_thought(cls, value: object) -> object:
        return value[:200] if isinstance(value, str) else value


class Role(StrEnum):
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


class Message(Contract):
    """One transcript entry in a provider-neutral shape.

    An assistant message may carry tool calls; each is answered by a `tool` message with the
    same `tool_call_id`. Providers translate this to their own wire format.
    """

    role: Role
    content: str = ""
    tool_calls: list[ActionCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None
    untrusted: bool = False


class Usage(Contract):
    input_tokens: int = 0
    output_tokens: int = 0
    model_calls: int = 0
    action_calls: int = 0

    def plus(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            model_calls=self.model_calls + other.model_calls,
            action_calls=self.action_calls + other.action_calls,
        )

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


class StepStatus(StrEnum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    DENIED = "denied"
    PENDING_APPROVAL = "pending_approval"
    REJECTED = "rejected"
    REFUSED = "refused"  # a daily budget is used up; the model is told so it can tell the person
    SKIPPED = "skipped"
    LIMIT_EXCEEDED = "limit_exceeded"
    # The run was cancelled while the action ran (a write is reconciled: found, it succeeded).
    CANCELLED = "cancelled"


class Step(Contract):
    index: int
    call_id: str | None = None
    action: str
    params: dict[str, Any] = Field(default_factory=dict)
    risk: Risk | None = None
    status: StepStatus
    result_summary: str = ""
    approval_id: str | None = None
    error: str | None = None


class UntrustedSource(Contract):
    """Untrusted text in front of the model: why its turn is tainted (DESIGN.md section 3)."""

    kind: Literal["result", "message", "memory"]
    action: str | None = None  # the action whose result it is (`get_post`), for a result
    step: int | None = None  # its step in this turn; None: an earlier turn of the thread read it
    excerpt: str = ""  # how the text starts


class ErrorInfo(Contract):
    cls: str
    message: str
    retryable: bool = False


class TurnResult(Contract):
    status: TurnStatus
    assistant_text: str = ""
    steps: list[Step] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    provider: str = ""
    model: str = ""
    error: ErrorInfo | None = None
    next_action: NextAction = NextAction.STOP
    # Untrusted text was in front of the model (from the site, the web or a memory so marked).
    untrusted: bool = False


class Checkpoint(Contract):
    """Where a paused or interrupted turn continues: the turn's transcript so far and counters.

    Persisted by the runtime after every round; the engine resumes from it without repeating
    the model calls or actions it records.
    """

    round: int = 0
    messages: list[Message] = Field(default_factory=list)
    steps: list[Step] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    assistant_text: str = ""
    elapsed_s: float = 0.0
    # A direct call (an MCP client or the API calling one action): the turn runs the calls its
    # messages already hold, through the same executor, and ends with their result; no model.
    direct: bool = False

    @model_validator(mode="before")
    @classmethod
    def _drop_run_flag(cls, value: Any) -> Any:
        # Checkpoints written before taint was read from the messages carried a per-run flag.
        if isinstance(value, dict) and "read_untrusted" in value:
            value = {k: v for k, v in value.items() if k != "read_untrusted"}
        return value


class TurnRequest(Contract):
    thread_id: str
    run_id: str
    trigger: Trigger
    message: str | None = None
    requesting_user: str | None = None
    execution_user: str | None = None
    policy: Policy = Field(default_factory=Policy)
    idempotency_key: str | None = None
    checkpoint: Checkpoint | None = None
    agent_id: str = "default"


class EventType(StrEnum):
    RUN_STARTED = "run.started"
    THINKING = "thinking"
    MESSAGE = "message"
    ACTION = "action"
    STEP = "step"
    RESULT = "result"
    APPROVAL = "approval"
    TOKENS = "tokens"
    RUN_FINISHED = "run.finished"
    ERROR = "error"


class Event(Contract):
    run_id: str
    thread_id: str
    seq: int
    type: EventType
    ts: datetime
    data: dict[str, Any] = Field(default_factory=dict)


# On an action's params schema: every value it sets is one a person says word for word (a
# setting, a profile field), never one to invent. A model that fills every optional field it
# is shown (a small local one) has the values its person did not say dropped before the action
# runs (`providers/local/grounding.py`).
DICTATED: dict[str, Any] = {"x-pressloop-dictated": True}


class CatalogEntry(Contract):
    """One action as the model and the API see it."""

    name: str
    description: str
    risk: Risk
    params_schema: dict[str, Any]
    network: bool = False
    # Params whose values are never stored, shown or logged (their schema says `secret`).
    secret_params: list[str] = Field(default_factory=list)
    # The MCP server whose tool this is (the prompt lists those in MCP_TOOL_CATALOG).
    server: str | None = None


class ActionContext(Contract):
    """Who and what is asking for an action: everything the executor's policy needs."""

    run_id: str
    thread_id: str
    agent_id: str = "default"
    trigger: Trigger
    step_index: int
    policy: Policy
    requesting_user: str | None = None
    execution_user: str | None = None
    # The untrusted text in front of the model when it asked (empty: the turn is not tainted).
    untrusted: list[UntrustedSource] = Field(default_factory=list)
    # This step already asked a person (a resumed turn): their decision answers it.
    approval_requested: bool = False
    reason: str = ""


class ActionOutcome(Contract):
    """What happened to one action call; `content` is what the model is told."""

    status: StepStatus
    content: str
    risk: Risk | None = None
    summary: str = ""
    approval_id: str | None = None
    error: str | None = None
    untrusted: bool = False
    data: Any = None

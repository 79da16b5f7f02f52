"""What the repositories return: plain records, one per table row kind."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pressloop.contracts import Checkpoint, ErrorInfo, Policy, RunStatus, Trigger, TurnResult, Usage


@dataclass(kw_only=True)
class AgentRecord:
    id: str
    name: str
    instructions: str
    files: dict[str, str]
    policy: dict[str, Any]
    created_at: datetime


@dataclass(kw_only=True)
class ThreadRecord:
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


@dataclass(kw_only=True)
class RunRecord:
    id: str
    thread_id: str
    agent_id: str
    trigger: Trigger
    status: RunStatus
    input: str | None
    requesting_user: str | None
    execution_user: str | None
    policy: Policy
    multitask: str
    attempt: int
    max_attempts: int
    not_before: datetime
    lease_owner: str | None
    lease_token: int
    lease_expires_at: datetime | None
    idempotency_key: str | None
    checkpoint: Checkpoint | None
    result: TurnResult | None
    usage: Usage
    error: ErrorInfo | None
    cancel_requested: bool
    event_seq: int
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    updated_at: datetime
    # The W3C trace context of the run's trace (`observability/tracing.py`); None: not traced.
    trace_context: dict[str, str] | None = None

    @property
    def trace_id(self) -> str | None:
        """The run's trace id (32 hex digits), from its stored `traceparent`."""
        parts = (self.trace_context or {}).get("traceparent", "").split("-")
        return parts[1] if len(parts) == 4 and len(parts[1]) == 32 else None


@dataclass(kw_only=True)
class Claim:
    """A run this worker now holds: every write it makes carries `token` (fencing)."""

    run: RunRecord
    owner: str
    token: int
    last_seq: int = 0


@dataclass(kw_only=True)
class MemoryRecord:
    id: int
    agent_id: str
    content: str
    tags: list[str] = field(default_factory=list)
    untrusted: bool = False  # written in a tainted turn
    created_at: datetime | None = None


@dataclass(kw_only=True)
class TokenRecord:
    id: str
    name: str
    role: str
    created_at: datetime
    revoked_at: datetime | None

"""Every table, declared once (SQLAlchemy Core). Migrations must produce exactly this schema.

The same declarations serve SQLite (embedded default) and PostgreSQL (many workers); where the
two differ (JSON storage, timestamps), a type here hides it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Dialect

metadata = sa.MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)


class UTCDateTime(sa.TypeDecorator[datetime]):
    """Timestamps are always timezone-aware UTC in Python, whatever the database keeps."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetimes are not stored; pass an aware UTC datetime")
        value = value.astimezone(UTC)
        # SQLite keeps text: store naive UTC so that text order is time order.
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


JSONType: sa.types.TypeEngine[Any] = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
ID = sa.String(40)

agents = sa.Table(
    "agents",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("instructions", sa.Text, nullable=False, server_default=""),
    sa.Column("files", JSONType, nullable=False),
    sa.Column("policy", JSONType, nullable=False),
    sa.Column("created_at", UTCDateTime, nullable=False),
)

threads = sa.Table(
    "threads",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("agent_id", ID, sa.ForeignKey("agents.id"), nullable=False),
    sa.Column("parent_id", ID, sa.ForeignKey("threads.id"), nullable=True),
    sa.Column("depth", sa.Integer, nullable=False, server_default="0"),
    sa.Column("title", sa.String(200), nullable=False, server_default=""),
    sa.Column("status", sa.String(20), nullable=False, server_default="idle"),
    sa.Column("created_by", sa.String(200), nullable=True),
    sa.Column("metadata", JSONType, nullable=False),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("updated_at", UTCDateTime, nullable=False),
    sa.Index(None, "parent_id"),
    sa.Index(None, "updated_at"),
)

messages = sa.Table(
    "messages",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("thread_id", ID, sa.ForeignKey("threads.id"), nullable=False),
    sa.Column("run_id", ID, nullable=True),
    sa.Column("role", sa.String(20), nullable=False),
    sa.Column("content", sa.Text, nullable=False, server_default=""),
    sa.Column("tool_calls", JSONType, nullable=True),
    sa.Column("tool_call_id", sa.String(100), nullable=True),
    sa.Column("name", sa.String(100), nullable=True),
    sa.Column("untrusted", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Index(None, "thread_id", "id"),
)

runs = sa.Table(
    "runs",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("thread_id", ID, sa.ForeignKey("threads.id"), nullable=False),
    sa.Column("agent_id", ID, nullable=False),
    sa.Column("trigger", sa.String(20), nullable=False),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("input", sa.Text, nullable=True),
    sa.Column("requesting_user", sa.String(200), nullable=True),
    sa.Column("execution_user", sa.String(200), nullable=True),
    sa.Column("policy", JSONType, nullable=False),
    sa.Column("multitask", sa.String(20), nullable=False, server_default="enqueue"),
    sa.Column("attempt", sa.Integer, nullable=False, server_default="0"),
    sa.Column("max_attempts", sa.Integer, nullable=False, server_default="5"),
    sa.Column("not_before", UTCDateTime, nullable=False),
    sa.Column("lease_owner", sa.String(200), nullable=True),
    sa.Column("lease_token", sa.Integer, nullable=False, server_default="0"),
    sa.Column("lease_expires_at", UTCDateTime, nullable=True),
    sa.Column("idempotency_key", sa.String(200), nullable=True),
    sa.Column("checkpoint", JSONType, nullable=True),
    sa.Column("result", JSONType, nullable=True),
    sa.Column("usage", JSONType, nullable=True),
    sa.Column("error", JSONType, nullable=True),
    sa.Column("cancel_requested", sa.Boolean, nullable=False, server_default=sa.false()),
    # The newest event's seq, kept with each write, so a new claim numbers on without a query.
    sa.Column("event_seq", sa.Integer, nullable=False, server_default="0"),
    # The W3C trace context ({"traceparent": ...}) of the run's first attempt, when traced:
    # later attempts, in whichever process, continue its trace.
    sa.Column("trace_context", JSONType, nullable=True),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("started_at", UTCDateTime, nullable=True),
    sa.Column("finished_at", UTCDateTime, nullable=True),
    sa.Column("updated_at", UTCDateTime, nullable=False),
    # The database itself refuses a second running run on one thread (DESIGN.md section 8).
    sa.Index(
        "uq_runs_one_running_per_thread",
        "thread_id",
        unique=True,
        sqlite_where=sa.text("status = 'running'"),
        postgresql_where=sa.text("status = 'running'"),
    ),
    sa.UniqueConstraint("thread_id", "idempotency_key"),
    sa.Index(None, "status", "not_before"),
    sa.Index(None, "thread_id", "created_at"),
)

run_events = sa.Table(
    "run_events",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_id", ID, sa.ForeignKey("runs.id"), nullable=False),
    sa.Column("thread_id", ID, nullable=False),
    sa.Column("seq", sa.Integer, nullable=False),
    sa.Column("type", sa.String(30), nullable=False),
    sa.Column("ts", UTCDateTime, nullable=False),
    sa.Column("data", JSONType, nullable=False),
    sa.UniqueConstraint("run_id", "seq"),
)

memories = sa.Table(
    "memories",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("agent_id", ID, sa.ForeignKey("agents.id"), nullable=False),
    sa.Column("content", sa.Text, nullable=False),
    sa.Column("tags", JSONType, nullable=False),
    # Written in a tainted turn (untrusted text was in front of the model): shown marked so.
    sa.Column("untrusted", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Index(None, "agent_id", "id"),
)

usage_daily = sa.Table(
    "usage_daily",
    metadata,
    sa.Column("day", sa.String(10), primary_key=True),
    sa.Column("scope", sa.String(10), primary_key=True),
    sa.Column("subject", sa.String(200), primary_key=True),
    sa.Column("input_tokens", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("output_tokens", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("model_calls", sa.Integer, nullable=False, server_default="0"),
    sa.Column("action_calls", sa.Integer, nullable=False, server_default="0"),
    sa.Column("runs", sa.Integer, nullable=False, server_default="0"),
    sa.Column("refusals", sa.Integer, nullable=False, server_default="0"),
)

api_tokens = sa.Table(
    "api_tokens",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("role", sa.String(20), nullable=False),
    sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
    sa.Column("created_at", UTCDateTime, nullable=False),
    # Refused from this moment on (null: until revoked).
    sa.Column("expires_at", UTCDateTime, nullable=True),
    # Written at most once a minute per token, not on every request.
    sa.Column("last_used_at", UTCDateTime, nullable=True),
    sa.Column("revoked_at", UTCDateTime, nullable=True),
)

# The admin UI's sign-ins: the browser's cookie holds a random session id, the database only its
# SHA-256. A session lives until it expires, its person signs out, or its token is revoked.
ui_sessions = sa.Table(
    "ui_sessions",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("session_hash", sa.String(64), nullable=False, unique=True),
    sa.Column("token_id", ID, sa.ForeignKey("api_tokens.id"), nullable=False),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("expires_at", UTCDateTime, nullable=False),
    sa.Column("revoked_at", UTCDateTime, nullable=True),
    sa.Index(None, "token_id"),
)

action_ledger = sa.Table(
    "action_ledger",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_id", ID, sa.ForeignKey("runs.id"), nullable=False),
    sa.Column("step_index", sa.Integer, nullable=False),
    sa.Column("thread_id", ID, nullable=False),
    sa.Column("call_id", sa.String(100), nullable=False),
    sa.Column("action", sa.String(100), nullable=False),
    sa.Column("params", JSONType, nullable=False),
    sa.Column("risk", sa.String(20), nullable=False),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("outcome", JSONType, nullable=True),
    sa.Column("snapshot", JSONType, nullable=True),
    sa.Column("undo_state", sa.String(20), nullable=True),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("finished_at", UTCDateTime, nullable=True),
    sa.UniqueConstraint("run_id", "step_index"),
)

approvals = sa.Table(
    "approvals",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("run_id", ID, sa.ForeignKey("runs.id"), nullable=False),
    sa.Column("thread_id", ID, nullable=False),
    sa.Column("step_index", sa.Integer, nullable=False),
    sa.Column("call_id", sa.String(100), nullable=False),
    sa.Column("action", sa.String(100), nullable=False),
    sa.Column("params", JSONType, nullable=False),
    sa.Column("risk", sa.String(20), nullable=False),
    sa.Column("trigger", sa.String(20), nullable=False),
    sa.Column("reason", sa.Text, nullable=False, server_default=""),
    sa.Column("preview", JSONType, nullable=True),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("requested_by", sa.String(200), nullable=True),
    sa.Column("decided_by", sa.String(200), nullable=True),
    sa.Column("note", sa.Text, nullable=True),
    sa.Column("edited_params", JSONType, nullable=True),
    # The untrusted text in front of the model when it asked (why a person must decide).
    sa.Column("untrusted", JSONType, nullable=True),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("expires_at", UTCDateTime, nullable=False),
    sa.Column("decided_at", UTCDateTime, nullable=True),
    sa.UniqueConstraint("run_id", "step_index"),
    sa.Index(None, "status", "expires_at"),
)

schedules = sa.Table(
    "schedules",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("agent_id", ID, sa.ForeignKey("agents.id"), nullable=False),
    sa.Column("thread_id", ID, sa.ForeignKey("threads.id"), nullable=True),
    sa.Column("kind", sa.String(10), nullable=False),
    sa.Column("interval_s", sa.Integer, nullable=True),
    sa.Column("cron", sa.String(100), nullable=True),
    sa.Column("timezone", sa.String(64), nullable=False, server_default="UTC"),
    sa.Column("active_hours", JSONType, nullable=True),
    sa.Column("message", sa.Text, nullable=True),
    sa.Column("status", sa.String(10), nullable=False, server_default="active"),
    sa.Column("next_due_at", UTCDateTime, nullable=False),
    sa.Column("last_due_at", UTCDateTime, nullable=True),
    sa.Column("last_run_id", ID, nullable=True),
    sa.Column("created_by", sa.String(200), nullable=True),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("updated_at", UTCDateTime, nullable=False),
    sa.Index(None, "status", "next_due_at"),
)

settings = sa.Table(
    "settings",
    metadata,
    sa.Column("key", sa.String(100), primary_key=True),
    sa.Column("value", JSONType, nullable=False),
    sa.Column("updated_at", UTCDateTime, nullable=False),
)

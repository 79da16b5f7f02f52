"""The first schema: agents, threads, messages, runs, run events, memories, usage, tokens.

Revision ID: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from pressloop.store.schema import UTCDateTime

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
ID = sa.String(40)


def upgrade() -> None:
    op.create_table(
        "agents",
        sa.Column("id", ID, primary_key=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("instructions", sa.Text, nullable=False, server_default=""),
        sa.Column("files", JSON, nullable=False),
        sa.Column("policy", JSON, nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_agents"),
    )
    op.create_table(
        "threads",
        sa.Column("id", ID),
        sa.Column("agent_id", ID, nullable=False),
        sa.Column("parent_id", ID, nullable=True),
        sa.Column("depth", sa.Integer, nullable=False, server_default="0"),
        sa.Column("title", sa.String(200), nullable=False, server_default=""),
        sa.Column("status", sa.String(20), nullable=False, server_default="idle"),
        sa.Column("created_by", sa.String(200), nullable=True),
        sa.Column("metadata", JSON, nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_threads"),
        sa.ForeignKeyConstraint(["agent_id"], ["agents.id"], name="fk_threads_agent_id_agents"),
        sa.ForeignKeyConstraint(["parent_id"], ["threads.id"], name="fk_threads_parent_id_threads"),
    )
    op.create_index("ix_threads_parent_id", "threads", ["parent_id"])
    op.create_index("ix_threads_updated_at", "threads", ["updated_at"])
    op.create_table(
        "messages",
        sa.Column("id", sa.Integer, autoincrement=True),
        sa.Column("thread_id", ID, nullable=False),
        sa.Column("run_id", ID, nullable=True),
        sa.Column("role", sa.String(20), nullable=False),
        sa.Column("content", sa.Text, nullable=False, server_default=""),
        sa.Column("tool_calls", JSON, nullable=True),
        sa.Column("tool_call_id", sa.String(100), nullable=True),
        sa.Column("name", sa.String(100), nullable=True),
        sa.Column("untrusted", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_messages"),
        sa.ForeignKeyConstraint(
            ["thread_id"], ["threads.id"], name="fk_messages_thread_id_threads"
        ),
    )
    op.create_index("ix_messages_thread_id_id", "messages", ["thread_id", "id"])
    op.create_table(
        "runs",
        sa.Column("id", ID),
        sa.Column("thread_id", ID, nullable=False),
        sa.Column("agent_id", ID, nullable=False),
        sa.Column("trigger", sa.String(20), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("input", sa.Text, nullable=True),
        sa.Column("requesting_user", sa.String(200), nullable=True),
        sa.Column("execution_user", sa.String(200), nullable=True),
        sa.Column("policy", JSON, nullable=False),
        sa.Column("multitask", sa.String(20), nullable=False, server_default="enqueue"),
        sa.Column("attempt", sa.Integer, nullable=False, server_default="0"),
        sa.Column("max_attempts", sa.Integer, nullable=False, server_default="5"),
        sa.Column("not_before", UTCDateTime, nullable=False),
        sa.Column("lease_owner", sa.String(200), nullable=True),
        sa.Column("lease_token", sa.Integer, nullable=False, server_default="0"),
        sa.Column("lease_expires_at", UTCDateTime, nullable=True),
        sa.Column("idempotency_key", sa.String(200), nullable=True),
        sa.Column("checkpoint", JSON, nullable=True),
        sa.Column("result", JSON, nullable=True),
        sa.Column("usage", JSON, nullable=True),
        sa.Column("error", JSON, nullable=True),
        sa.Column("cancel_requested", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("started_at", UTCDateTime, nullable=True),
        sa.Column("finished_at", UTCDateTime, nullable=True),
        sa.Column("updated_at", UTCDateTime, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_runs"),
        sa.ForeignKeyConstraint(["thread_id"], ["threads.id"], name="fk_runs_thread_id_threads"),
        sa.UniqueConstraint(
            "thread_id", "idempotency_key", name="uq_runs_thread_id_idempotency_key"
        ),
    )
    op.create_index(
        "uq_runs_one_running_per_thread",
        "runs",
        ["thread_id"],
        unique=True,
        sqlite_where=sa.text("status = 'running'"),
        postgresql_where=sa.text("status = 'running'"),
    )
    op.create_index("ix_runs_status_not_before", "runs", ["status", "not_before"])
    op.create_index("ix_runs_thread_id_created_at", "runs", ["thread_id", "created_at"])
    op.create_table(
        "run_events",
        sa.Column("id", sa.Integer, autoincrement=True),
        sa.Column("run_id", ID, nullable=False),
        sa.Column("thread_id", ID, nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("type", sa.String(30), nullable=False),
        sa.Column("ts", UTCDateTime, nullable=False),
        sa.Column("data", JSON, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_run_events"),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name="fk_run_events_run_id_runs"),
        sa.UniqueConstraint("run_id", "seq", name="uq_run_events_run_id_seq"),
    )
    op.create_table(
        "memories",
        sa.Column("id", sa.Integer, autoincrement=True),
        sa.Column("agent_id", ID, nullable=False),
        sa.Column("content", sa.Text, nullable=False),
        sa.Column("tags", JSON, nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_memories"),
        sa.ForeignKeyConstraint(["agent_id"], ["agents.id"], name="fk_memories_agent_id_agents"),
    )
    op.create_index("ix_memories_agent_id_id", "memories", ["agent_id", "id"])
    op.create_table(
        "usage_daily",
        sa.Column("day", sa.String(10)),
        sa.Column("scope", sa.String(10)),
        sa.Column("subject", sa.String(200)),
        sa.Column("input_tokens", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("output_tokens", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("model_calls", sa.Integer, nullable=False, server_default="0"),
        sa.Column("action_calls", sa.Integer, nullable=False, server_default="0"),
        sa.Column("runs", sa.Integer, nullable=False, server_default="0"),
        sa.PrimaryKeyConstraint("day", "scope", "subject", name="pk_usage_daily"),
    )
    op.create_table(
        "api_tokens",
        sa.Column("id", ID),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("role", sa.String(20), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("last_used_at", UTCDateTime, nullable=True),
        sa.Column("revoked_at", UTCDateTime, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_api_tokens"),
        sa.UniqueConstraint("token_hash", name="uq_api_tokens_token_hash"),
    )
    op.create_table(
        "settings",
        sa.Column("key", sa.String(100)),
        sa.Column("value", JSON, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
        sa.PrimaryKeyConstraint("key", name="pk_settings"),
    )


def downgrade() -> None:
    for table in (
        "settings",
        "api_tokens",
        "usage_daily",
        "memories",
        "run_events",
        "runs",
        "messages",
        "threads",
        "agents",
    ):
        op.drop_table(table)

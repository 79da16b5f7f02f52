"""Heartbeat schedules (interval or cron, timezone, active hours).

Revision ID: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from pressloop.store.schema import UTCDateTime

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
ID = sa.String(40)


def upgrade() -> None:
    op.create_table(
        "schedules",
        sa.Column("id", ID),
        sa.Column("agent_id", ID, nullable=False),
        sa.Column("thread_id", ID, nullable=True),
        sa.Column("kind", sa.String(10), nullable=False),
        sa.Column("interval_s", sa.Integer, nullable=True),
        sa.Column("cron", sa.String(100), nullable=True),
        sa.Column("timezone", sa.String(64), nullable=False, server_default="UTC"),
        sa.Column("active_hours", JSON, nullable=True),
        sa.Column("message", sa.Text, nullable=True),
        sa.Column("status", sa.String(10), nullable=False, server_default="active"),
        sa.Column("next_due_at", UTCDateTime, nullable=False),
        sa.Column("last_due_at", UTCDateTime, nullable=True),
        sa.Column("last_run_id", ID, nullable=True),
        sa.Column("created_by", sa.String(200), nullable=True),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_schedules"),
        sa.ForeignKeyConstraint(["agent_id"], ["agents.id"], name="fk_schedules_agent_id_agents"),
        sa.ForeignKeyConstraint(
            ["thread_id"], ["threads.id"], name="fk_schedules_thread_id_threads"
        ),
    )
    op.create_index("ix_schedules_status_next_due_at", "schedules", ["status", "next_due_at"])


def downgrade() -> None:
    op.drop_table("schedules")

"""Approvals: a destructive step waiting for a person (approve, reject, or expire).

Revision ID: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from pressloop.store.schema import UTCDateTime

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
ID = sa.String(40)


def upgrade() -> None:
    op.create_table(
        "approvals",
        sa.Column("id", ID),
        sa.Column("run_id", ID, nullable=False),
        sa.Column("thread_id", ID, nullable=False),
        sa.Column("step_index", sa.Integer, nullable=False),
        sa.Column("call_id", sa.String(100), nullable=False),
        sa.Column("action", sa.String(100), nullable=False),
        sa.Column("params", JSON, nullable=False),
        sa.Column("risk", sa.String(20), nullable=False),
        sa.Column("trigger", sa.String(20), nullable=False),
        sa.Column("reason", sa.Text, nullable=False, server_default=""),
        sa.Column("preview", JSON, nullable=True),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("requested_by", sa.String(200), nullable=True),
        sa.Column("decided_by", sa.String(200), nullable=True),
        sa.Column("note", sa.Text, nullable=True),
        sa.Column("edited_params", JSON, nullable=True),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("expires_at", UTCDateTime, nullable=False),
        sa.Column("decided_at", UTCDateTime, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_approvals"),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name="fk_approvals_run_id_runs"),
        sa.UniqueConstraint("run_id", "step_index", name="uq_approvals_run_id_step_index"),
    )
    op.create_index("ix_approvals_status_expires_at", "approvals", ["status", "expires_at"])


def downgrade() -> None:
    op.drop_table("approvals")

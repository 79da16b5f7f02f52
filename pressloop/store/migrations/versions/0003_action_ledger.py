"""The action ledger: each step's intent before it runs and its outcome after.

Revision ID: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from pressloop.store.schema import UTCDateTime

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
ID = sa.String(40)


def upgrade() -> None:
    op.create_table(
        "action_ledger",
        sa.Column("id", sa.Integer, autoincrement=True),
        sa.Column("run_id", ID, nullable=False),
        sa.Column("step_index", sa.Integer, nullable=False),
        sa.Column("thread_id", ID, nullable=False),
        sa.Column("call_id", sa.String(100), nullable=False),
        sa.Column("action", sa.String(100), nullable=False),
        sa.Column("params", JSON, nullable=False),
        sa.Column("risk", sa.String(20), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("outcome", JSON, nullable=True),
        sa.Column("snapshot", JSON, nullable=True),
        sa.Column("undo_state", sa.String(20), nullable=True),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("finished_at", UTCDateTime, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_action_ledger"),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name="fk_action_ledger_run_id_runs"),
        sa.UniqueConstraint("run_id", "step_index", name="uq_action_ledger_run_id_step_index"),
    )


def downgrade() -> None:
    op.drop_table("action_ledger")

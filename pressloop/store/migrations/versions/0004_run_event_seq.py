"""runs.event_seq: the newest event number, written with the events (no max() on claim).

Revision ID: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("event_seq", sa.Integer, nullable=False, server_default="0"))
    op.execute(
        "UPDATE runs SET event_seq = COALESCE("
        "(SELECT MAX(seq) FROM run_events WHERE run_events.run_id = runs.id), 0)"
    )


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("event_seq")

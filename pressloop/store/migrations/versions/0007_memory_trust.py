"""memories.untrusted: a memory written in a turn that had untrusted text in front of the model
is stored untrusted, and shown to later turns marked so.

Revision ID: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("memories") as batch:
        batch.add_column(
            sa.Column("untrusted", sa.Boolean, nullable=False, server_default=sa.false())
        )


def downgrade() -> None:
    with op.batch_alter_table("memories") as batch:
        batch.drop_column("untrusted")

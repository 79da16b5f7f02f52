"""usage_daily.refusals: turns refused by a budget, counted per day, user and site.

Revision ID: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("usage_daily") as batch:
        batch.add_column(sa.Column("refusals", sa.Integer, nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("usage_daily") as batch:
        batch.drop_column("refusals")

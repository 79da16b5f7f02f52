"""Access that ends: api_tokens.expires_at, and ui_sessions (the admin UI's sign-ins, kept as
hashes, revoked on sign-out or with their token).

Revision ID: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from pressloop.store.schema import UTCDateTime

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

ID = sa.String(40)


def upgrade() -> None:
    with op.batch_alter_table("api_tokens") as batch:
        batch.add_column(sa.Column("expires_at", UTCDateTime, nullable=True))
    op.create_table(
        "ui_sessions",
        sa.Column("id", ID),
        sa.Column("session_hash", sa.String(64), nullable=False),
        sa.Column("token_id", ID, nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("expires_at", UTCDateTime, nullable=False),
        sa.Column("revoked_at", UTCDateTime, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_ui_sessions"),
        sa.ForeignKeyConstraint(
            ["token_id"], ["api_tokens.id"], name="fk_ui_sessions_token_id_api_tokens"
        ),
        sa.UniqueConstraint("session_hash", name="uq_ui_sessions_session_hash"),
    )
    op.create_index("ix_ui_sessions_token_id", "ui_sessions", ["token_id"])


def downgrade() -> None:
    op.drop_table("ui_sessions")
    with op.batch_alter_table("api_tokens") as batch:
        batch.drop_column("expires_at")

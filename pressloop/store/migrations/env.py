"""Alembic environment: runs the numbered migrations on the connection the caller hands over."""

from __future__ import annotations

from alembic import context

from pressloop.store.schema import metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations through pressloop.store.migrate, which passes a connection")

context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()

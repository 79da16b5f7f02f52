"""PostgreSQL: `NOTIFY pressloop_runs` when a transaction leaves a run that a worker may claim, so
idle workers in other processes and on other machines start it at once instead of at their
next poll (`store/notify.py`). SQLite: nothing (its workers poll; one file serves one machine).

The triggers are deferred to the commit and look at the thread as it is then: a run queued and
claimed in the same transaction (a chat turn started where it was asked) wakes no one, nor does
a run queued behind a busy one, until that one ends. PostgreSQL delivers the notification only
if the transaction commits, and once per transaction (identical payloads are folded).

Revision ID: 0011
"""

from __future__ import annotations

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

FUNCTION = """
CREATE FUNCTION pressloop_notify_claimable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- The thread may start a run now: one is queued and none is running or paused on an
    -- approval. Whether it is due yet is the worker's to check (clocks differ between machines).
    IF EXISTS (SELECT 1 FROM runs WHERE thread_id = NEW.thread_id AND status = 'queued')
       AND NOT EXISTS (
           SELECT 1 FROM runs
           WHERE thread_id = NEW.thread_id AND status IN ('running', 'waiting_approval')
       ) THEN
        PERFORM pg_notify('pressloop_runs', '');
    END IF;
    RETURN NULL;
END
$$
"""

# A run inserted queued; a run that became queued (a retry, a resumed approval, a lease
# requeued); a run that stopped being busy (its thread's next run may start).
TRIGGERS = (
    """
    CREATE CONSTRAINT TRIGGER runs_claimable_after_insert AFTER INSERT ON runs
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN (NEW.status = 'queued')
    EXECUTE FUNCTION pressloop_notify_claimable()
    """,
    """
    CREATE CONSTRAINT TRIGGER runs_claimable_after_update AFTER UPDATE OF status ON runs
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN (
        OLD.status IS DISTINCT FROM NEW.status
        AND (NEW.status = 'queued' OR OLD.status IN ('running', 'waiting_approval'))
    )
    EXECUTE FUNCTION pressloop_notify_claimable()
    """,
)


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(FUNCTION)
    for trigger in TRIGGERS:
        op.execute(trigger)


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("DROP TRIGGER IF EXISTS runs_claimable_after_update ON runs")
    op.execute("DROP TRIGGER IF EXISTS runs_claimable_after_insert ON runs")
    op.execute("DROP FUNCTION IF EXISTS pressloop_notify_claimable()")

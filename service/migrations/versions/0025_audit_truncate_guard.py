"""the audit trail refuses TRUNCATE too, on PostgreSQL

UPDATE and DELETE are refused by triggers since 0018; TRUNCATE fires neither, so it emptied the
trail. A statement-level BEFORE TRUNCATE trigger refuses it with the same function. SQLite has no
TRUNCATE (its unqualified DELETE, which it may run as one, meets the DELETE trigger).

Revision ID: 0025_audit_truncate_guard
Revises: 0024_notification_log_day_counts
"""

from __future__ import annotations

from alembic import op

revision = "0025_audit_truncate_guard"
down_revision = "0024_notification_log_day_counts"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            """
            CREATE TRIGGER audit_events_append_only_truncate BEFORE TRUNCATE ON audit_events
            FOR EACH STATEMENT EXECUTE FUNCTION audit_events_append_only()
            """
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER audit_events_append_only_truncate ON audit_events")

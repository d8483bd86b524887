"""notification log counts: attempts per UTC hour, kept by triggers; log indexes that end in id

Revision ID: 0012_notification_log_counts
Revises: 0009_notifications
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import service.storage.db

revision = "0012_notification_log_counts"
down_revision = "0009_notifications"
branch_labels = None
depends_on = None

# SQLite has row triggers only. Its timestamps are text in SQLAlchemy's format, which an hour must
# match exactly to compare equal with the values queries bind.
SQLITE_HOUR = "strftime('%Y-%m-%d %H:00:00.000000', created_at)"
SQLITE_TRIGGERS = [
    """
    CREATE TRIGGER notification_logs_counted AFTER INSERT ON notification_logs
    BEGIN
        INSERT INTO notification_log_counts (org_id, hour, channel_id, event_type, status, attempts)
        VALUES (
            NEW.org_id, strftime('%Y-%m-%d %H:00:00.000000', NEW.created_at), NEW.channel_id,
            NEW.event_type, NEW.status, 1
        )
        ON CONFLICT (org_id, hour, channel_id, event_type, status) DO UPDATE SET attempts = attempts + 1;
    END
    """,
    """
    CREATE TRIGGER notification_logs_uncounted AFTER DELETE ON notification_logs
    BEGIN
        UPDATE notification_log_counts SET attempts = attempts - 1
        WHERE org_id = OLD.org_id AND hour = strftime('%Y-%m-%d %H:00:00.000000', OLD.created_at)
            AND channel_id = OLD.channel_id AND event_type = OLD.event_type AND status = OLD.status;
    END
    """,
]

# PostgreSQL counts a whole statement at once: a COPY of millions of rows is one upsert per key.
POSTGRESQL_HOUR = "date_trunc('hour', created_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'"
POSTGRESQL_TRIGGERS = [
    """
    CREATE FUNCTION notification_logs_counted() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO notification_log_counts (org_id, hour, channel_id, event_type, status, attempts)
        SELECT org_id, date_trunc('hour', created_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC',
            channel_id, event_type, status, count(*)
        FROM added GROUP BY 1, 2, 3, 4, 5
        ON CONFLICT (org_id, hour, channel_id, event_type, status)
        DO UPDATE SET attempts = notification_log_counts.attempts + EXCLUDED.attempts;
        RETURN NULL;
    END $$
    """,
    """
    CREATE TRIGGER notification_logs_counted AFTER INSERT ON notification_logs
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION notification_logs_counted()
    """,
    """
    CREATE FUNCTION notification_logs_uncounted() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        UPDATE notification_log_counts AS counts SET attempts = counts.attempts - removed.attempts
        FROM (
            SELECT org_id, date_trunc('hour', created_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS hour,
                channel_id, event_type, status, count(*) AS attempts
            FROM gone GROUP BY 1, 2, 3, 4, 5
        ) AS removed
        WHERE (counts.org_id, counts.hour, counts.channel_id, counts.event_type, counts.status)
            = (removed.org_id, removed.hour, removed.channel_id, removed.event_type, removed.status);
        RETURN NULL;
    END $$
    """,
    """
    CREATE TRIGGER notification_logs_uncounted AFTER DELETE ON notification_logs
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION notification_logs_uncounted()
    """,
]


def upgrade() -> None:
    op.create_table(
        "notification_log_counts",
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("hour", service.storage.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("channel_id", sa.String(length=40), nullable=False),
        sa.Column("event_type", sa.String(length=40), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["org_id"],
            ["organizations.id"],
            name=op.f("fk_notification_log_counts_org_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "org_id", "hour", "channel_id", "event_type", "status", name=op.f("pk_notification_log_counts")
        ),
    )
    op.create_index(
        "ix_notification_log_counts_org_id_channel_id_status_hour",
        "notification_log_counts",
        ["org_id", "channel_id", "status", "hour", "event_type", "attempts"],
    )
    postgresql = op.get_bind().dialect.name == "postgresql"
    # The attempts logged before this revision, counted as the triggers count every later one.
    hour = POSTGRESQL_HOUR if postgresql else SQLITE_HOUR
    op.execute(
        "INSERT INTO notification_log_counts (org_id, hour, channel_id, event_type, status, attempts) "  # noqa: S608 (constant SQL)
        f"SELECT org_id, {hour}, channel_id, event_type, status, COUNT(*) FROM notification_logs "
        "GROUP BY 1, 2, 3, 4, 5"
    )
    for statement in POSTGRESQL_TRIGGERS if postgresql else SQLITE_TRIGGERS:
        op.execute(statement)
    op.drop_index("ix_notification_logs_org_id_channel_id_status_created_at", table_name="notification_logs")
    op.drop_index("ix_notification_logs_org_id_created_at", table_name="notification_logs")
    op.create_index(
        "ix_notification_logs_org_id_channel_id_status_created_at_id",
        "notification_logs",
        ["org_id", "channel_id", "status", "created_at", "id"],
    )
    op.create_index(
        "ix_notification_logs_org_id_created_at_id", "notification_logs", ["org_id", "created_at", "id"]
    )


def downgrade() -> None:
    op.drop_index("ix_notification_logs_org_id_created_at_id", table_name="notification_logs")
    op.drop_index(
        "ix_notification_logs_org_id_channel_id_status_created_at_id", table_name="notification_logs"
    )
    op.create_index("ix_notification_logs_org_id_created_at", "notification_logs", ["org_id", "created_at"])
    op.create_index(
        "ix_notification_logs_org_id_channel_id_status_created_at",
        "notification_logs",
        ["org_id", "channel_id", "status", "created_at"],
    )
    for trigger in ("notification_logs_uncounted", "notification_logs_counted"):
        if op.get_bind().dialect.name == "postgresql":
            op.execute(f"DROP TRIGGER {trigger} ON notification_logs")
            op.execute(f"DROP FUNCTION {trigger}()")
        else:
            op.execute(f"DROP TRIGGER {trigger}")
    op.drop_index(
        "ix_notification_log_counts_org_id_channel_id_status_hour", table_name="notification_log_counts"
    )
    op.drop_table("notification_log_counts")

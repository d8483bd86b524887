"""notification log counts per UTC day, kept by triggers beside the hourly ones

Revision ID: 0024_notification_log_day_counts
Revises: 0023_deployment_status_versions
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import service.storage.db

revision = "0024_notification_log_day_counts"
down_revision = "0023_deployment_status_versions"
branch_labels = None
depends_on = "0012_notification_log_counts"

KEY = "org_id, day, channel_id, event_type, status"

# As the hourly counts' triggers (0012): SQLite's in SQLAlchemy's text format, row by row.
SQLITE_TRIGGERS = [
    f"""
    CREATE TRIGGER notification_logs_day_counted AFTER INSERT ON notification_logs
    BEGIN
        INSERT INTO notification_log_day_counts ({KEY}, attempts)
        VALUES (
            NEW.org_id, strftime('%Y-%m-%d 00:00:00.000000', NEW.created_at), NEW.channel_id,
            NEW.event_type, NEW.status, 1
        )
        ON CONFLICT ({KEY}) DO UPDATE SET attempts = attempts + 1;
    END
    """,
    """
    CREATE TRIGGER notification_logs_day_uncounted AFTER DELETE ON notification_logs
    BEGIN
        UPDATE notification_log_day_counts SET attempts = attempts - 1
        WHERE org_id = OLD.org_id AND day = strftime('%Y-%m-%d 00:00:00.000000', OLD.created_at)
            AND channel_id = OLD.channel_id AND event_type = OLD.event_type AND status = OLD.status;
    END
    """,
]

# PostgreSQL's a statement at a time.
POSTGRESQL_DAY = "date_trunc('day', created_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'"
POSTGRESQL_TRIGGERS = [
    f"""
    CREATE FUNCTION notification_logs_day_counted() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO notification_log_day_counts ({KEY}, attempts)
        SELECT org_id, {POSTGRESQL_DAY}, channel_id, event_type, status, count(*)
        FROM added GROUP BY 1, 2, 3, 4, 5
        ON CONFLICT ({KEY})
        DO UPDATE SET attempts = notification_log_day_counts.attempts + EXCLUDED.attempts;
        RETURN NULL;
    END $$
    """,
    """
    CREATE TRIGGER notification_logs_day_counted AFTER INSERT ON notification_logs
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION notification_logs_day_counted()
    """,
    f"""
    CREATE FUNCTION notification_logs_day_uncounted() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        UPDATE notification_log_day_counts AS counts SET attempts = counts.attempts - removed.attempts
        FROM (
            SELECT org_id, {POSTGRESQL_DAY} AS day, channel_id, event_type, status, count(*) AS attempts
            FROM gone GROUP BY 1, 2, 3, 4, 5
        ) AS removed
        WHERE (counts.org_id, counts.day, counts.channel_id, counts.event_type, counts.status)
            = (removed.org_id, removed.day, removed.channel_id, removed.event_type, removed.status);
        RETURN NULL;
    END $$
    """,
    """
    CREATE TRIGGER notification_logs_day_uncounted AFTER DELETE ON notification_logs
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION notification_logs_day_uncounted()
    """,
]


def upgrade() -> None:
    op.create_table(
        "notification_log_day_counts",
        sa.Column("org_id", sa.String(), nullable=False),
        sa.Column("day", service.storage.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("channel_id", sa.String(length=40), nullable=False),
        sa.Column("event_type", sa.String(length=40), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["org_id"],
            ["organizations.id"],
            name=op.f("fk_notification_log_day_counts_org_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "org_id", "day", "channel_id", "event_type", "status", name=op.f("pk_notification_log_day_counts")
        ),
    )
    op.create_index(
        "ix_notification_log_day_counts_org_id_channel_id_status_day",
        "notification_log_day_counts",
        ["org_id", "channel_id", "status", "day", "event_type", "attempts"],
    )
    postgresql = op.get_bind().dialect.name == "postgresql"
    # The attempts counted so far, from their hourly counts.
    day = (
        "date_trunc('day', hour AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'"
        if postgresql
        else "strftime('%Y-%m-%d 00:00:00.000000', hour)"
    )
    op.execute(
        f"INSERT INTO notification_log_day_counts ({KEY}, attempts) "  # noqa: S608 (constant SQL)
        f"SELECT org_id, {day}, channel_id, event_type, status, SUM(attempts) FROM notification_log_counts "
        "GROUP BY 1, 2, 3, 4, 5"
    )
    for statement in POSTGRESQL_TRIGGERS if postgresql else SQLITE_TRIGGERS:
        op.execute(statement)


def downgrade() -> None:
    for trigger in ("notification_logs_day_counted", "notification_logs_day_uncounted"):
        if op.get_bind().dialect.name == "postgresql":
            op.execute(f"DROP TRIGGER {trigger} ON notification_logs")
            op.execute(f"DROP FUNCTION {trigger}()")
        else:
            op.execute(f"DROP TRIGGER {trigger}")
    op.drop_table("notification_log_day_counts")

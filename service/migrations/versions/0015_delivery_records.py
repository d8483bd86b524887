"""delivery records: deliveries with their event type, state (failed and held besides pending, sent
and dead), last attempt and retry round, indexed for their list and for claiming; attempts with
their request and response; a channel's previous signing secret during a rotation

Revision ID: 0015_delivery_records
Revises: 0014_deployment_month_rollups
Depends on: 0012_notification_log_counts
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import service.storage.db

revision = "0015_delivery_records"
down_revision = "0014_deployment_month_rollups"
branch_labels = None
# It changes the notification tables, made on another branch.
depends_on = "0012_notification_log_counts"

DELIVERIES = "notification_deliveries"
LOGS = "notification_logs"
CHANNELS = "notification_channels"
OLD_CLAIM_INDEX = ("ix_notification_deliveries_status_next_attempt_at", ["status", "next_attempt_at"])
DELIVERY_INDEXES = {
    "ix_notification_deliveries_status_next_attempt_at_channel_id": [
        "status",
        "next_attempt_at",
        "channel_id",
    ],
    "ix_notification_deliveries_org_id_created_at_id": ["org_id", "created_at", "id"],
    "ix_notification_deliveries_org_id_channel_id_created_at_id": [
        "org_id",
        "channel_id",
        "created_at",
        "id",
    ],
    "ix_notification_deliveries_org_id_status_created_at_id": ["org_id", "status", "created_at", "id"],
}
LOG_INDEX = ("ix_notification_logs_delivery_id_attempt", ["delivery_id", "attempt"])
# The latest attempt of the delivery being updated, for the columns that now keep it.
LATEST_ATTEMPT = (
    f"(SELECT {{column}} FROM {LOGS} WHERE {LOGS}.delivery_id = {DELIVERIES}.id "  # noqa: S608 (constant SQL)
    f"ORDER BY {LOGS}.attempt DESC LIMIT 1)"
)


def upgrade() -> None:
    op.add_column(CHANNELS, sa.Column("previous_secret_encrypted", sa.String(length=2000), nullable=True))
    op.add_column(
        CHANNELS,
        sa.Column("previous_secret_expires_at", service.storage.db.UTCDateTime(timezone=True), nullable=True),
    )
    for column in (
        sa.Column("request_headers", sa.JSON(), nullable=True),
        sa.Column("response_headers", sa.JSON(), nullable=True),
        sa.Column("response_body", sa.Text(), nullable=True),
    ):
        op.add_column(LOGS, column)
    op.create_index(LOG_INDEX[0], LOGS, LOG_INDEX[1])

    # Added with a default so that existing rows can be filled, which is then dropped.
    op.add_column(
        DELIVERIES, sa.Column("event_type", sa.String(length=40), nullable=False, server_default="")
    )
    op.add_column(DELIVERIES, sa.Column("schedule_from", sa.Integer(), nullable=False, server_default="0"))
    for column in (
        sa.Column("last_attempt_at", service.storage.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("last_response_status", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.String(length=500), nullable=True),
    ):
        op.add_column(DELIVERIES, column)
    op.execute(
        f"UPDATE {DELIVERIES} SET event_type = "  # noqa: S608 (constant SQL)
        f"(SELECT events.type FROM events WHERE events.id = {DELIVERIES}.event_id)"
    )
    # A pending delivery that was tried already is waiting for its retry: `failed` now.
    op.execute(f"UPDATE {DELIVERIES} SET status = 'failed' WHERE status = 'pending' AND attempts > 0")  # noqa: S608
    op.execute(
        f"UPDATE {DELIVERIES} SET "  # noqa: S608 (constant SQL)
        + ", ".join(
            f"{target} = {LATEST_ATTEMPT.format(column=source)}"
            for target, source in (
                ("last_attempt_at", "created_at"),
                ("last_response_status", "response_status"),
                ("last_error", "error"),
            )
        )
        + " WHERE attempts > 0"
    )
    with op.batch_alter_table(DELIVERIES) as batch:
        batch.alter_column("event_type", server_default=None)
        batch.alter_column("schedule_from", server_default=None)
    op.drop_index(OLD_CLAIM_INDEX[0], table_name=DELIVERIES)
    for name, columns in DELIVERY_INDEXES.items():
        op.create_index(name, DELIVERIES, columns)


def downgrade() -> None:
    for name in DELIVERY_INDEXES:
        op.drop_index(name, table_name=DELIVERIES)
    op.create_index(OLD_CLAIM_INDEX[0], DELIVERIES, OLD_CLAIM_INDEX[1])
    # The states the earlier schema knows: a failed or held delivery is pending there.
    op.execute(f"UPDATE {DELIVERIES} SET status = 'pending' WHERE status IN ('failed', 'held')")  # noqa: S608
    op.execute(
        f"UPDATE {DELIVERIES} SET next_attempt_at = created_at "  # noqa: S608 (constant SQL)
        "WHERE next_attempt_at IS NULL AND status = 'pending'"
    )
    for column in ("last_error", "last_response_status", "last_attempt_at", "schedule_from", "event_type"):
        op.drop_column(DELIVERIES, column)
    op.drop_index(LOG_INDEX[0], table_name=LOGS)
    # Plain ALTER TABLE on SQLite too: rebuilding the log's table would drop its counting triggers.
    for column in ("response_body", "response_headers", "request_headers"):
        op.drop_column(LOGS, column)
    op.drop_column(CHANNELS, "previous_secret_expires_at")
    op.drop_column(CHANNELS, "previous_secret_encrypted")

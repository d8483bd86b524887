"""notifications: channels, subscriptions, the delivery queue and the delivery log

Revision ID: 0009_notifications
Revises: 0007_events
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import service.storage.db

revision = "0009_notifications"
down_revision = "0007_events"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "notification_channels",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("secret_encrypted", sa.String(length=2000), nullable=True),
        sa.Column("disabled_reason", sa.String(length=500), nullable=True),
        sa.Column("disabled_at", service.storage.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("created_at", service.storage.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["org_id"],
            ["organizations.id"],
            name=op.f("fk_notification_channels_org_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_notification_channels")),
        sa.UniqueConstraint("org_id", "name", name="uq_notification_channels_org_id_name"),
    )
    op.create_table(
        "notification_logs",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("delivery_id", sa.String(length=40), nullable=False),
        sa.Column("event_id", sa.String(length=40), nullable=False),
        sa.Column("event_type", sa.String(length=40), nullable=False),
        sa.Column("channel_id", sa.String(length=40), nullable=False),
        sa.Column("channel_name", sa.String(length=200), nullable=False),
        sa.Column("channel_kind", sa.String(length=20), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("response_status", sa.Integer(), nullable=True),
        sa.Column("latency_ms", sa.Integer(), nullable=True),
        sa.Column("error", sa.String(length=500), nullable=True),
        sa.Column("next_attempt_at", service.storage.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("created_at", service.storage.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["org_id"],
            ["organizations.id"],
            name=op.f("fk_notification_logs_org_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_notification_logs")),
    )
    op.create_index(
        "ix_notification_logs_org_id_channel_id_status_created_at",
        "notification_logs",
        ["org_id", "channel_id", "status", "created_at"],
    )
    op.create_index("ix_notification_logs_org_id_created_at", "notification_logs", ["org_id", "created_at"])
    op.create_table(
        "notification_deliveries",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("event_id", sa.String(length=40), nullable=False),
        sa.Column("channel_id", sa.String(length=40), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", service.storage.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("lease_expires_at", service.storage.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("lease_token", sa.String(length=40), nullable=True),
        sa.Column("created_at", service.storage.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["channel_id"],
            ["notification_channels.id"],
            name=op.f("fk_notification_deliveries_channel_id_notification_channels"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["event_id"],
            ["events.id"],
            name=op.f("fk_notification_deliveries_event_id_events"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["org_id"],
            ["organizations.id"],
            name=op.f("fk_notification_deliveries_org_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_notification_deliveries")),
        sa.UniqueConstraint("event_id", "channel_id", name="uq_notification_deliveries_event_id_channel_id"),
    )
    op.create_index(
        "ix_notification_deliveries_status_next_attempt_at",
        "notification_deliveries",
        ["status", "next_attempt_at"],
    )
    op.create_table(
        "notification_subscriptions",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("channel_id", sa.String(length=40), nullable=False),
        sa.Column("event_type", sa.String(length=40), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("created_at", service.storage.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", service.storage.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["channel_id"],
            ["notification_channels.id"],
            name=op.f("fk_notification_subscriptions_channel_id_notification_channels"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["org_id"],
            ["organizations.id"],
            name=op.f("fk_notification_subscriptions_org_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_notification_subscriptions")),
        sa.UniqueConstraint(
            "channel_id", "event_type", name="uq_notification_subscriptions_channel_id_event_type"
        ),
    )
    op.create_index(
        "ix_notification_subscriptions_org_id_event_type",
        "notification_subscriptions",
        ["org_id", "event_type"],
    )


def downgrade() -> None:
    op.drop_index("ix_notification_subscriptions_org_id_event_type", table_name="notification_subscriptions")
    op.drop_table("notification_subscriptions")
    op.drop_index("ix_notification_deliveries_status_next_attempt_at", table_name="notification_deliveries")
    op.drop_table("notification_deliveries")
    op.drop_index("ix_notification_logs_org_id_created_at", table_name="notification_logs")
    op.drop_index("ix_notification_logs_org_id_channel_id_status_created_at", table_name="notification_logs")
    op.drop_table("notification_logs")
    op.drop_table("notification_channels")

"""events: what happened in an organization, and the outbox of notifications

Revision ID: 0007_events
Revises: 0001_foundation
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import service.storage.db

revision = "0007_events"
down_revision = "0001_foundation"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "events",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("type", sa.String(length=40), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("occurred_at", service.storage.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("fanned_out_at", service.storage.db.UTCDateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["org_id"], ["organizations.id"], name=op.f("fk_events_org_id_organizations"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_events")),
    )
    op.create_index("ix_events_org_id_occurred_at", "events", ["org_id", "occurred_at"])
    op.create_index("ix_events_fanned_out_at", "events", ["fanned_out_at"])


def downgrade() -> None:
    op.drop_index("ix_events_fanned_out_at", table_name="events")
    op.drop_index("ix_events_org_id_occurred_at", table_name="events")
    op.drop_table("events")

"""idempotency keys: each organization's Idempotency-Key values with the answer they were given

Revision ID: 0017_idempotency_keys
Revises: 0015_delivery_records
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import service.storage.db

revision = "0017_idempotency_keys"
down_revision = "0015_delivery_records"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "idempotency_keys",
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("method", sa.String(length=10), nullable=False),
        sa.Column("path", sa.String(length=2000), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("claim", sa.String(length=32), nullable=False),
        sa.Column("locked_until", service.storage.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("response_headers", sa.JSON(), nullable=True),
        sa.Column("response_body_encrypted", sa.Text(), nullable=True),
        sa.Column("created_at", service.storage.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["org_id"],
            ["organizations.id"],
            name=op.f("fk_idempotency_keys_org_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("org_id", "key", name=op.f("pk_idempotency_keys")),
    )
    op.create_index("ix_idempotency_keys_created_at", "idempotency_keys", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_idempotency_keys_created_at", table_name="idempotency_keys")
    op.drop_table("idempotency_keys")

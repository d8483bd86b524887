"""reviewed changes: protected environments and labels, org settings, change requests and reviews

Revision ID: 0019_change_requests
Revises: 0018_members_audit
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import service.storage.db

revision = "0019_change_requests"
down_revision = "0018_members_audit"
branch_labels = None
# It adds a column to the registries, a branch of its own.
depends_on = "0005_registries"

COLUMNS = (
    ("environments", "protected"),
    ("environments", "required_approvals"),
    ("registries", "protected_labels"),
    ("organizations", "policy_approval_required"),
    ("organizations", "change_request_ttl_days"),
)


def upgrade() -> None:
    # Plain ALTER TABLE (SQLite 3.35+ drops columns too): a batch would copy and drop these tables,
    # and dropping `organizations` would cascade to every row of the organization.
    op.add_column("environments", sa.Column("protected", sa.Boolean(), nullable=False, server_default=sa.false()))
    op.add_column("environments", sa.Column("required_approvals", sa.Integer(), nullable=False, server_default="1"))
    op.add_column("registries", sa.Column("protected_labels", sa.JSON(), nullable=False, server_default="[]"))
    op.add_column(
        "organizations",
        sa.Column("policy_approval_required", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    op.add_column(
        "organizations", sa.Column("change_request_ttl_days", sa.Integer(), nullable=False, server_default="7")
    )
    op.create_table(
        "change_requests",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("target", sa.String(length=300), nullable=False),
        sa.Column("reason", sa.String(length=2000), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("preview", sa.JSON(), nullable=False),
        sa.Column("required_approvals", sa.Integer(), nullable=False),
        sa.Column("requested_by_key_id", sa.String(length=40), nullable=False),
        sa.Column("requested_by_key_name", sa.String(length=200), nullable=False),
        sa.Column("requested_by_member_id", sa.String(length=40), nullable=True),
        sa.Column("requested_by_email", sa.String(length=320), nullable=True),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("conflict", sa.Text(), nullable=True),
        sa.Column("created_at", service.storage.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("decided_at", service.storage.db.UTCDateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["org_id"],
            ["organizations.id"],
            name=op.f("fk_change_requests_org_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_change_requests")),
    )
    op.create_index("ix_change_requests_org_id_status_id", "change_requests", ["org_id", "status", "id"])
    op.create_table(
        "change_reviews",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("change_request_id", sa.String(length=40), nullable=False),
        sa.Column("member_id", sa.String(length=40), nullable=False),
        sa.Column("member_email", sa.String(length=320), nullable=False),
        sa.Column("key_id", sa.String(length=40), nullable=False),
        sa.Column("verdict", sa.String(length=10), nullable=False),
        sa.Column("comment", sa.String(length=2000), nullable=False),
        sa.Column("created_at", service.storage.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["change_request_id"],
            ["change_requests.id"],
            name=op.f("fk_change_reviews_change_request_id_change_requests"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_change_reviews")),
        sa.UniqueConstraint("change_request_id", "member_id", name="uq_change_reviews_change_request_id_member_id"),
    )


def downgrade() -> None:
    op.drop_table("change_reviews")
    op.drop_index("ix_change_requests_org_id_status_id", table_name="change_requests")
    op.drop_table("change_requests")
    for table, column in COLUMNS:
        op.drop_column(table, column)

"""sign-in with an identity provider: trusted workloads, sign-in sessions, organization settings,
and how an audit event's actor proved who it is

Revision ID: 0030_sign_in
Revises: 0029_policy_checks
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from service.storage.db import UTCDateTime

revision = "0030_sign_in"
down_revision = "0029_policy_checks"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "workload_identities",
        sa.Column("id", sa.String(length=40), primary_key=True),
        sa.Column(
            "org_id",
            sa.String(length=40),
            sa.ForeignKey("organizations.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("issuer", sa.String(length=500), nullable=False),
        sa.Column("audience", sa.String(length=500), nullable=False),
        sa.Column("conditions", sa.JSON(), nullable=False),
        sa.Column("role", sa.String(length=20), nullable=False),
        sa.Column("created_at", UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", UTCDateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("org_id", "name", name="uq_workload_identities_org_id_name"),
    )
    op.create_index("ix_workload_identities_issuer", "workload_identities", ["issuer"])
    op.create_table(
        "sign_in_sessions",
        sa.Column("id", sa.String(length=40), primary_key=True),
        sa.Column(
            "org_id",
            sa.String(length=40),
            sa.ForeignKey("organizations.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("token_hash", sa.String(length=64), nullable=False, unique=True),
        sa.Column("member_id", sa.String(length=40), nullable=True),
        sa.Column("workload_id", sa.String(length=40), nullable=True),
        sa.Column("started_at", UTCDateTime(timezone=True), nullable=False),
        sa.Column("expires_at", UTCDateTime(timezone=True), nullable=False),
        sa.Column("ended_at", UTCDateTime(timezone=True), nullable=True),
    )
    # Plain ALTER TABLE: a batch would copy organizations and cascade to every table that names it.
    op.add_column(
        "organizations", sa.Column("sign_in_domains", sa.JSON(), nullable=False, server_default="[]")
    )
    op.add_column(
        "organizations",
        sa.Column("sign_in_default_role", sa.String(length=20), nullable=False, server_default="viewer"),
    )
    op.add_column("organizations", sa.Column("group_roles", sa.JSON(), nullable=False, server_default="{}"))
    op.add_column("audit_events", sa.Column("actor_via", sa.String(length=20), nullable=True))
    op.add_column("audit_events", sa.Column("actor_claims", sa.JSON(), nullable=True))


def downgrade() -> None:
    op.drop_column("audit_events", "actor_claims")
    op.drop_column("audit_events", "actor_via")
    op.drop_column("organizations", "group_roles")
    op.drop_column("organizations", "sign_in_default_role")
    op.drop_column("organizations", "sign_in_domains")
    op.drop_table("sign_in_sessions")
    op.drop_index("ix_workload_identities_issuer", table_name="workload_identities")
    op.drop_table("workload_identities")

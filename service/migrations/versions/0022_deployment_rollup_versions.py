"""a version per organization of its deployment rollups, for the analytics answers kept in memory

Revision ID: 0022_deployment_rollup_versions
Revises: 0021_audit_stats_index
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022_deployment_rollup_versions"
down_revision = "0021_audit_stats_index"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "deployment_rollup_versions",
        sa.Column("org_id", sa.String(), sa.ForeignKey("organizations.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("version", sa.Integer(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("deployment_rollup_versions")

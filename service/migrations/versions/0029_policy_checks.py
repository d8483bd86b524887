"""policies carry a check, its message, enforcement, scope and examples; policy exceptions; the
violations a deployment job went ahead through

Revision ID: 0029_policy_checks
Revises: 0028_change_request_sealed
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0029_policy_checks"
down_revision = "0028_change_request_sealed"
branch_labels = None
depends_on = None

POLICY_TABLES = ("governance_policies", "governance_policy_versions")
CHECK_COLUMNS = ("check", "message", "enforcement", "scope", "examples")


def upgrade() -> None:
    for table in POLICY_TABLES:
        op.add_column(table, sa.Column("check", sa.Text(), nullable=True))
        op.add_column(table, sa.Column("message", sa.Text(), nullable=True))
        # Existing policies enforce as their severity says: error denies, warning warns.
        op.add_column(table, sa.Column("enforcement", sa.String(10), nullable=False, server_default="deny"))
        op.add_column(table, sa.Column("scope", sa.JSON(), nullable=False, server_default=sa.text("'{}'")))
        op.add_column(table, sa.Column("examples", sa.JSON(), nullable=False, server_default=sa.text("'[]'")))
        rows = sa.table(table, sa.column("enforcement"), sa.column("severity"))
        op.execute(rows.update().where(rows.c.severity == "warning").values(enforcement="warn"))
    op.add_column("deployment_jobs", sa.Column("policy_violations", sa.JSON(), nullable=True))
    op.create_table(
        "governance_policy_exceptions",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column(
            "org_id", sa.String(40), sa.ForeignKey("organizations.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column(
            "policy_id",
            sa.String(40),
            sa.ForeignKey("governance_policies.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("agent_stable_key", sa.String(200), nullable=True),
        sa.Column("environment_name", sa.String(200), nullable=True),
        sa.Column("reason", sa.String(2000), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_by", sa.String(320), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index(
        "ix_governance_policy_exceptions_org_id_policy_id",
        "governance_policy_exceptions",
        ["org_id", "policy_id"],
    )


# Plain ALTER TABLE drops (SQLite 3.35+): a batch would copy the policies' table and cascade deletes.
def downgrade() -> None:
    op.drop_index("ix_governance_policy_exceptions_org_id_policy_id", "governance_policy_exceptions")
    op.drop_table("governance_policy_exceptions")
    op.drop_column("deployment_jobs", "policy_violations")
    for table in POLICY_TABLES:
        for column in CHECK_COLUMNS:
            op.drop_column(table, column)

"""an index for the audit trail's counts per day and action

Revision ID: 0021_audit_stats_index
Revises: 0020_deployment_metric_rollups
"""

from __future__ import annotations

from alembic import op

revision = "0021_audit_stats_index"
down_revision = "0020_deployment_metric_rollups"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_audit_events_org_id_occurred_at_action",
        "audit_events",
        ["org_id", "occurred_at", "action"],
    )


def downgrade() -> None:
    op.drop_index("ix_audit_events_org_id_occurred_at_action", table_name="audit_events")

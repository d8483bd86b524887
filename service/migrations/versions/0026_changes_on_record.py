"""reviewed changes on record: the environment governing a request, approvals not counted, and the
change request kept by what it made (audit events, deployment jobs, labels, policy versions): its
reference as the API answers it (id, requester, the approvals that applied it), written when the
change is applied, since those never change afterwards

Revision ID: 0026_changes_on_record
Revises: 0025_audit_truncate_guard
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0026_changes_on_record"
down_revision = "0025_audit_truncate_guard"
branch_labels = None
# It adds a column to the policy versions, a branch of its own.
depends_on = "0006_providers_governance"

COLUMNS = (
    ("change_requests", sa.Column("environment_id", sa.String(length=40), nullable=True)),
    ("change_reviews", sa.Column("not_counted_because", sa.String(length=500), nullable=True)),
    ("audit_events", sa.Column("change_request", sa.JSON(), nullable=True)),
    ("deployment_jobs", sa.Column("change_request", sa.JSON(), nullable=True)),
    ("registry_artifact_labels", sa.Column("change_request", sa.JSON(), nullable=True)),
    ("governance_policy_versions", sa.Column("change_request", sa.JSON(), nullable=True)),
)


def upgrade() -> None:
    # Plain ALTER TABLE on SQLite too: a batch would copy these tables, the jobs' millions of rows
    # among them, and drop the audit trail's append-only triggers with its copy.
    for table, column in COLUMNS:
        op.add_column(table, column)
    # The requests opened so far are governed by their deployment's environment.
    environment_id = (
        "payload ->> 'environmentId'"
        if op.get_bind().dialect.name == "postgresql"
        else "json_extract(payload, '$.environmentId')"
    )
    op.execute(
        f"UPDATE change_requests SET environment_id = {environment_id} "  # noqa: S608 (constant SQL)
        "WHERE kind = 'deployment'"
    )


def downgrade() -> None:
    for table, column in reversed(COLUMNS):
        op.drop_column(table, column.name)

"""deployment jobs and events carry the W3C traceparent of the request that caused them

Revision ID: 0031_trace_context
Revises: 0030_sign_in
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0031_trace_context"
down_revision = "0030_sign_in"
branch_labels = None
depends_on = None

TABLES = ("deployment_jobs", "events")


# Plain ALTER TABLE: a nullable column is added in place on both databases, without copying rows.
def upgrade() -> None:
    for table in TABLES:
        op.add_column(table, sa.Column("trace_context", sa.String(55), nullable=True))


def downgrade() -> None:
    for table in TABLES:
        op.drop_column(table, "trace_context")

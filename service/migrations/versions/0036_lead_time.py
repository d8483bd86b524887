"""agent versions' first complete deployment in each environment, kept for lead time for changes

Counted from the jobs' agent results kept so far, as the worker would have kept them.

Revision ID: 0036_lead_time
Revises: 0034_promotion
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import service.storage.db
from service.deployments.rollups import count_arrivals

revision = "0036_lead_time"
down_revision = "0035_rollouts"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "deployment_arrivals",
        sa.Column("org_id", sa.String(), _cascading("organizations.id"), primary_key=True),
        sa.Column("environment_id", sa.String(), _cascading("environments.id"), primary_key=True),
        sa.Column("agent_id", sa.String(), _cascading("agents.id"), primary_key=True),
        sa.Column("version", sa.Integer(), primary_key=True),
        sa.Column("reached_at", service.storage.db.UTCDateTime(), nullable=False),
        sa.Column("lead_seconds", sa.Float(), nullable=False),
    )
    bind = op.get_bind()
    jobs = sa.table("deployment_jobs", sa.column("org_id", sa.String()))
    for (org_id,) in bind.execute(sa.select(jobs.c.org_id).distinct()).all():
        count_arrivals(bind, org_id)


def _cascading(column: str) -> sa.ForeignKey:
    return sa.ForeignKey(column, ondelete="CASCADE")


def downgrade() -> None:
    op.drop_table("deployment_arrivals")

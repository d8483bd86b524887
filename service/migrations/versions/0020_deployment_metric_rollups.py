"""delivery metrics and agents' results kept per day and month, and open incidents

The rollups are counted from the jobs that have ended so far, as the worker would have kept them.

Revision ID: 0020_deployment_metric_rollups
Revises: 0019_change_requests
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import service.storage.db
from service.deployments.rollups import Ended, count_agent_results, count_metrics, metric_rows

revision = "0020_deployment_metric_rollups"
down_revision = "0019_change_requests"
branch_labels = None
depends_on = None

ENDED = ("complete", "error", "partial")


def upgrade() -> None:
    metrics = op.create_table(
        "deployment_metric_rollups",
        *_span_key(),
        sa.Column("jobs", sa.Integer(), nullable=False),
        sa.Column("successes", sa.Integer(), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("durations", sa.Text(), nullable=False),
        sa.Column("restores", sa.Text(), nullable=False),
    )
    op.create_table(
        "deployment_agent_rollups",
        *_span_key(),
        sa.Column("stable_key", sa.String(100), primary_key=True),
        sa.Column("results", sa.Integer(), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
    )
    incidents = op.create_table(
        "deployment_incidents",
        sa.Column("environment_id", sa.String(), _environment(), primary_key=True),
        sa.Column("org_id", sa.String(), _organization(), nullable=False),
        sa.Column("failed_at", service.storage.db.UTCDateTime(), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
    )
    _backfill(metrics, incidents)


def _span_key() -> list[sa.Column]:
    return [
        sa.Column("org_id", sa.String(), _organization(), primary_key=True),
        sa.Column("span", sa.String(8), primary_key=True),
        sa.Column("start", sa.Date(), primary_key=True),
        sa.Column("environment_id", sa.String(), _environment(), primary_key=True),
    ]


def _organization() -> sa.ForeignKey:
    return sa.ForeignKey("organizations.id", ondelete="CASCADE")


def _environment() -> sa.ForeignKey:
    return sa.ForeignKey("environments.id", ondelete="CASCADE")


def _backfill(metrics: sa.Table, incidents: sa.Table) -> None:
    jobs = sa.table(
        "deployment_jobs",
        sa.column("org_id", sa.String()),
        sa.column("id", sa.String()),
        sa.column("environment_id", sa.String()),
        sa.column("status", sa.String()),
        sa.column("created_at", service.storage.db.UTCDateTime()),
        sa.column("started_at", service.storage.db.UTCDateTime()),
        sa.column("finished_at", service.storage.db.UTCDateTime()),
    )
    bind = op.get_bind()
    for (org_id,) in bind.execute(sa.select(jobs.c.org_id).distinct()).all():
        count_agent_results(bind, org_id, bind.dialect.name)
        ended = bind.execute(
            sa.select(
                jobs.c.environment_id, jobs.c.status, jobs.c.created_at, jobs.c.started_at, jobs.c.finished_at
            )
            .where(jobs.c.org_id == org_id, jobs.c.status.in_(ENDED))
            .order_by(jobs.c.environment_id, jobs.c.finished_at, jobs.c.id)
        )
        counted, still_open = count_metrics(Ended(*row) for row in ended)
        if counted:
            op.bulk_insert(metrics, metric_rows(org_id, counted))
        if still_open:
            op.bulk_insert(
                incidents,
                [
                    {"environment_id": environment_id, "org_id": org_id, "failed_at": failed_at, "day": day}
                    for environment_id, (failed_at, day) in still_open.items()
                ],
            )


def downgrade() -> None:
    op.drop_table("deployment_incidents")
    op.drop_table("deployment_agent_rollups")
    op.drop_table("deployment_metric_rollups")

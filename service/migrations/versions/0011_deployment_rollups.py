"""deployment rollups: ended jobs per environment and UTC day or hour

Revision ID: 0011_deployment_rollups
Revises: 0008_deployments
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011_deployment_rollups"
down_revision = "0008_deployments"
branch_labels = None
depends_on = None


def _rollup_keys(table: str) -> list[sa.SchemaItem]:
    return [
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("environment_id", sa.String(length=40), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.ForeignKeyConstraint(
            ["environment_id"],
            ["environments.id"],
            name=op.f(f"fk_{table}_environment_id_environments"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["org_id"],
            ["organizations.id"],
            name=op.f(f"fk_{table}_org_id_organizations"),
            ondelete="CASCADE",
        ),
    ]


def upgrade() -> None:
    op.create_table(
        "deployment_rollups",
        *_rollup_keys("deployment_rollups"),
        sa.Column("week", sa.Date(), nullable=False),
        sa.Column("jobs", sa.Integer(), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("org_id", "environment_id", "day", name=op.f("pk_deployment_rollups")),
    )
    op.create_index(
        "ix_deployment_rollups_org_id_day",
        "deployment_rollups",
        ["org_id", "day", "environment_id", "jobs", "failures"],
    )
    op.create_index(
        "ix_deployment_rollups_org_id_week",
        "deployment_rollups",
        ["org_id", "week", "environment_id", "day", "jobs", "failures"],
    )
    op.create_table(
        "deployment_hourly_rollups",
        *_rollup_keys("deployment_hourly_rollups"),
        sa.Column("hour", sa.Integer(), nullable=False),
        sa.Column("jobs", sa.Integer(), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint(
            "org_id", "environment_id", "day", "hour", name=op.f("pk_deployment_hourly_rollups")
        ),
    )
    op.create_index(
        "ix_deployment_hourly_rollups_org_id_day",
        "deployment_hourly_rollups",
        ["org_id", "day", "hour", "environment_id", "jobs", "failures"],
    )
    _backfill()


def _backfill() -> None:
    """Count the jobs that ended before this revision, as the worker counts each job that ends."""
    if op.get_bind().dialect.name == "postgresql":
        day = "(created_at AT TIME ZONE 'UTC')::date"
        hour = "EXTRACT(HOUR FROM created_at AT TIME ZONE 'UTC')::int"
        week = "date_trunc('week', day::timestamp)::date"
    else:  # SQLite keeps UTC timestamps and dates as ISO 8601 text
        day, hour = "date(created_at)", "CAST(strftime('%H', created_at) AS INTEGER)"
        week = "date(day, 'weekday 0', '-6 days')"
    op.execute(
        "INSERT INTO deployment_hourly_rollups (org_id, environment_id, day, hour, jobs, failures) "  # noqa: S608 (constant SQL)
        f"SELECT org_id, environment_id, {day}, {hour}, COUNT(*), "
        "SUM(CASE WHEN status IN ('error', 'partial') THEN 1 ELSE 0 END) FROM deployment_jobs "
        f"WHERE status IN ('complete', 'error', 'partial') GROUP BY org_id, environment_id, {day}, {hour}"
    )
    op.execute(
        "INSERT INTO deployment_rollups (org_id, environment_id, day, week, jobs, failures) "  # noqa: S608 (constant SQL)
        f"SELECT org_id, environment_id, day, {week}, SUM(jobs), SUM(failures) FROM deployment_hourly_rollups "
        "GROUP BY org_id, environment_id, day"
    )


def downgrade() -> None:
    op.drop_index("ix_deployment_hourly_rollups_org_id_day", table_name="deployment_hourly_rollups")
    op.drop_table("deployment_hourly_rollups")
    op.drop_index("ix_deployment_rollups_org_id_week", table_name="deployment_rollups")
    op.drop_index("ix_deployment_rollups_org_id_day", table_name="deployment_rollups")
    op.drop_table("deployment_rollups")

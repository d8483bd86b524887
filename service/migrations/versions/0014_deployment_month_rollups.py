"""deployment month rollups: each environment's ended jobs per UTC day, a month of days to a row,
in place of the daily rollup

Revision ID: 0014_deployment_month_rollups
Revises: 0011_deployment_rollups
"""

from __future__ import annotations

import calendar
import json
from datetime import date

import sqlalchemy as sa
from alembic import op

revision = "0014_deployment_month_rollups"
down_revision = "0011_deployment_rollups"
branch_labels = None
depends_on = None

TABLE = "deployment_month_rollups"
DAILY = "deployment_rollups"
DAILY_INDEXES = {
    "ix_deployment_rollups_org_id_day": ["org_id", "day", "environment_id", "jobs", "failures"],
    "ix_deployment_rollups_org_id_week": ["org_id", "week", "environment_id", "day", "jobs", "failures"],
}


def _create_rollup(table: str, *columns: sa.Column) -> None:
    """A rollup table keyed by org, environment and its first column (a day or a month)."""
    op.create_table(
        table,
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("environment_id", sa.String(length=40), nullable=False),
        *columns,
        sa.ForeignKeyConstraint(
            ["environment_id"],
            ["environments.id"],
            name=op.f(f"fk_{table}_environment_id_environments"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["org_id"], ["organizations.id"], name=op.f(f"fk_{table}_org_id_organizations"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("org_id", "environment_id", columns[0].name, name=op.f(f"pk_{table}")),
    )


def upgrade() -> None:
    _create_rollup(
        TABLE,
        sa.Column("month", sa.Date(), nullable=False),
        sa.Column("jobs", sa.Text(), nullable=False),
        sa.Column("failures", sa.Text(), nullable=False),
    )
    _backfill()
    for name in DAILY_INDEXES:
        op.drop_index(name, table_name=DAILY)
    op.drop_table(DAILY)


def _backfill() -> None:
    """The months of the hourly rollup (which counts every job that ended before this revision)."""
    bind = op.get_bind()
    days = sa.text(
        "SELECT org_id, environment_id, day, SUM(jobs), SUM(failures) FROM deployment_hourly_rollups "
        "GROUP BY org_id, environment_id, day"
    )
    months: dict[tuple[str, str, date], tuple[list[int], list[int]]] = {}
    for org_id, environment_id, day, jobs, failures in bind.execute(days):
        day = day if isinstance(day, date) else date.fromisoformat(day)
        month = day.replace(day=1)
        length = calendar.monthrange(month.year, month.month)[1]
        counts = months.setdefault((org_id, environment_id, month), ([0] * length, [0] * length))
        counts[0][day.day - 1], counts[1][day.day - 1] = jobs, failures
    rows = [
        {"org_id": org, "environment_id": env, "month": month, "jobs": _text(jobs), "failures": _text(failed)}
        for (org, env, month), (jobs, failed) in months.items()
    ]
    if rows:
        table = sa.table(TABLE, *(sa.column(name) for name in rows[0]))
        op.bulk_insert(table, rows)


def _text(numbers: list[int]) -> str:
    return json.dumps(numbers, separators=(",", ":"))


def downgrade() -> None:
    """The daily rollup again, recounted from the hourly one as its revision first did."""
    _create_rollup(
        DAILY,
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("week", sa.Date(), nullable=False),
        sa.Column("jobs", sa.Integer(), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
    )
    for name, columns in DAILY_INDEXES.items():
        op.create_index(name, DAILY, columns)
    if op.get_bind().dialect.name == "postgresql":
        week = "date_trunc('week', day::timestamp)::date"
    else:
        week = "date(day, 'weekday 0', '-6 days')"
    op.execute(
        f"INSERT INTO {DAILY} (org_id, environment_id, day, week, jobs, failures) "  # noqa: S608 (constant SQL)
        f"SELECT org_id, environment_id, day, {week}, SUM(jobs), SUM(failures) FROM deployment_hourly_rollups "
        "GROUP BY org_id, environment_id, day"
    )
    op.drop_table(TABLE)

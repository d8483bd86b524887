"""progressive rollout: deployment jobs carry their waves and the next wave's time, job agents what
they ran before, environments a verification webhook

Revision ID: 0035_rollouts
Revises: 0034_promotion
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0035_rollouts"
down_revision = "0034_promotion"
branch_labels = None
depends_on = None


# Plain ALTER TABLE on both databases, as 0034: a table rebuild on SQLite would drop the triggers
# of 0023. Job statuses are plain strings (no CHECK constraint), so the new ones need nothing.
def upgrade() -> None:
    op.add_column("deployment_jobs", sa.Column("rollout", sa.JSON(), nullable=True))
    op.add_column("deployment_jobs", sa.Column("next_wave_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column(
        "deployment_jobs", sa.Column("wave_attempts", sa.Integer(), nullable=False, server_default="0")
    )
    op.add_column("deployment_job_agents", sa.Column("previous_version", sa.Integer(), nullable=True))
    op.add_column("deployment_job_agents", sa.Column("previous_config", sa.JSON(), nullable=True))
    op.add_column("deployment_job_agents", sa.Column("previous_config_hash", sa.String(64), nullable=True))
    op.add_column(
        "deployment_job_agents",
        sa.Column("rolled_back", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    op.add_column("environments", sa.Column("verification_webhook_url", sa.String(2000), nullable=True))


def downgrade() -> None:
    op.drop_column("environments", "verification_webhook_url")
    for column in ("rolled_back", "previous_config_hash", "previous_config", "previous_version"):
        op.drop_column("deployment_job_agents", column)
    for column in ("wave_attempts", "next_wave_at", "rollout"):
        op.drop_column("deployment_jobs", column)

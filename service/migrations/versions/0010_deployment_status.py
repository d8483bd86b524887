"""deployment status: the state of each agent in each environment, deployment settings per org,
and the indexes history and an environment's newest job read

Revision ID: 0010_deployment_status
Revises: 0008_deployments
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import service.storage.db

revision = "0010_deployment_status"
down_revision = "0008_deployments"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_index("ix_deployment_job_agents_agent_id", table_name="deployment_job_agents")
    op.create_index(
        "ix_deployment_job_agents_agent_id_status", "deployment_job_agents", ["agent_id", "status"]
    )
    op.create_index(
        "ix_deployment_jobs_org_id_created_at_id", "deployment_jobs", ["org_id", "created_at", "id"]
    )
    op.create_index(
        "ix_deployment_jobs_org_id_environment_id_created_at_id",
        "deployment_jobs",
        ["org_id", "environment_id", "created_at", "id"],
    )
    op.create_table(
        "deployment_states",
        sa.Column("agent_id", sa.String(length=40), nullable=False),
        sa.Column("environment_id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("state", sa.String(length=20), nullable=False),
        sa.Column("since", service.storage.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("tool_hashes", sa.JSON(), nullable=False),
        sa.Column("error", sa.String(length=2000), nullable=True),
        sa.Column("last_job_id", sa.String(length=40), nullable=True),
        sa.Column("check_at", service.storage.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("cell", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["agent_id"], ["agents.id"], name=op.f("fk_deployment_states_agent_id_agents"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["environment_id"],
            ["environments.id"],
            name=op.f("fk_deployment_states_environment_id_environments"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["org_id"],
            ["organizations.id"],
            name=op.f("fk_deployment_states_org_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("agent_id", "environment_id", name=op.f("pk_deployment_states")),
    )
    op.create_index("ix_deployment_states_org_id_state", "deployment_states", ["org_id", "state"])
    op.create_index("ix_deployment_states_environment_id", "deployment_states", ["environment_id"])
    op.create_index("ix_deployment_states_check_at", "deployment_states", ["check_at"])
    # What already runs gets a row, due at once: the worker's periodic check evaluates it (and
    # writes its cell; until then the pair reads as in sync).
    op.execute(
        sa.text(
            "INSERT INTO deployment_states (agent_id, environment_id, org_id, state, since, tool_hashes, "
            "error, last_job_id, check_at, cell) "
            "SELECT d.agent_id, d.environment_id, d.org_id, 'in_sync', d.deployed_at, '{}', NULL, d.job_id, "
            "d.deployed_at, '' FROM agent_deployments d JOIN agents a ON a.id = d.agent_id "
            "WHERE a.archived_at IS NULL"
        )
    )
    op.create_table(
        "deployment_policies",
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("stale_after_days", sa.Integer(), nullable=False),
        sa.Column("updated_at", service.storage.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["org_id"],
            ["organizations.id"],
            name=op.f("fk_deployment_policies_org_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("org_id", name=op.f("pk_deployment_policies")),
    )


def downgrade() -> None:
    op.drop_table("deployment_policies")
    op.drop_index("ix_deployment_states_check_at", table_name="deployment_states")
    op.drop_index("ix_deployment_states_environment_id", table_name="deployment_states")
    op.drop_index("ix_deployment_states_org_id_state", table_name="deployment_states")
    op.drop_table("deployment_states")
    op.drop_index("ix_deployment_jobs_org_id_environment_id_created_at_id", table_name="deployment_jobs")
    op.drop_index("ix_deployment_jobs_org_id_created_at_id", table_name="deployment_jobs")
    op.drop_index("ix_deployment_job_agents_agent_id_status", table_name="deployment_job_agents")
    op.create_index("ix_deployment_job_agents_agent_id", "deployment_job_agents", ["agent_id"])

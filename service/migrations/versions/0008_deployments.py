"""deployments: jobs with per-agent results, deployed state per agent and environment, signing keys

Revision ID: 0008_deployments
Revises: 0003_agents, 0004_secrets_tools, 0007_events
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import service.storage.db

revision = "0008_deployments"
down_revision = ("0003_agents", "0004_secrets_tools", "0007_events")
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "deployment_jobs",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("environment_id", sa.String(length=40), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("message", sa.String(length=2000), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("lease_token", sa.String(length=40), nullable=True),
        sa.Column("lease_expires_at", service.storage.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("created_at", service.storage.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("started_at", service.storage.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("finished_at", service.storage.db.UTCDateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["environment_id"],
            ["environments.id"],
            name=op.f("fk_deployment_jobs_environment_id_environments"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["org_id"],
            ["organizations.id"],
            name=op.f("fk_deployment_jobs_org_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_deployment_jobs")),
    )
    op.create_index("ix_deployment_jobs_org_id_id", "deployment_jobs", ["org_id", "id"])
    op.create_index(
        "ix_deployment_jobs_org_id_environment_id_status_id",
        "deployment_jobs",
        ["org_id", "environment_id", "status", "id"],
    )
    op.create_index("ix_deployment_jobs_org_id_status_id", "deployment_jobs", ["org_id", "status", "id"])
    op.create_index(
        "ix_deployment_jobs_status_lease_expires_at", "deployment_jobs", ["status", "lease_expires_at"]
    )
    op.create_table(
        "deployment_job_agents",
        sa.Column("job_id", sa.String(length=40), nullable=False),
        sa.Column("agent_id", sa.String(length=40), nullable=False),
        sa.Column("stable_key", sa.String(length=100), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("config_hash", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("error", sa.String(length=2000), nullable=True),
        sa.ForeignKeyConstraint(
            ["agent_id"],
            ["agents.id"],
            name=op.f("fk_deployment_job_agents_agent_id_agents"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["deployment_jobs.id"],
            name=op.f("fk_deployment_job_agents_job_id_deployment_jobs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("job_id", "agent_id", name=op.f("pk_deployment_job_agents")),
    )
    op.create_index("ix_deployment_job_agents_agent_id", "deployment_job_agents", ["agent_id"])
    op.create_table(
        "agent_deployments",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("environment_id", sa.String(length=40), nullable=False),
        sa.Column("agent_id", sa.String(length=40), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("config_hash", sa.String(length=64), nullable=False),
        sa.Column("job_id", sa.String(length=40), nullable=False),
        sa.Column("deployed_at", service.storage.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["agent_id"], ["agents.id"], name=op.f("fk_agent_deployments_agent_id_agents"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["environment_id"],
            ["environments.id"],
            name=op.f("fk_agent_deployments_environment_id_environments"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["org_id"],
            ["organizations.id"],
            name=op.f("fk_agent_deployments_org_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_agent_deployments")),
        sa.UniqueConstraint(
            "environment_id", "agent_id", name="uq_agent_deployments_environment_id_agent_id"
        ),
    )
    op.create_index("ix_agent_deployments_org_id_agent_id", "agent_deployments", ["org_id", "agent_id"])
    op.create_table(
        "deployment_signing_keys",
        sa.Column("environment_id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("ciphertext", sa.Text(), nullable=False),
        sa.Column("created_at", service.storage.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["environment_id"],
            ["environments.id"],
            name=op.f("fk_deployment_signing_keys_environment_id_environments"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["org_id"],
            ["organizations.id"],
            name=op.f("fk_deployment_signing_keys_org_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("environment_id", name=op.f("pk_deployment_signing_keys")),
    )
    op.create_index(
        op.f("ix_deployment_signing_keys_org_id"), "deployment_signing_keys", ["org_id"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_deployment_signing_keys_org_id"), table_name="deployment_signing_keys")
    op.drop_table("deployment_signing_keys")
    op.drop_index("ix_agent_deployments_org_id_agent_id", table_name="agent_deployments")
    op.drop_table("agent_deployments")
    op.drop_index("ix_deployment_job_agents_agent_id", table_name="deployment_job_agents")
    op.drop_table("deployment_job_agents")
    op.drop_index("ix_deployment_jobs_status_lease_expires_at", table_name="deployment_jobs")
    op.drop_index("ix_deployment_jobs_org_id_status_id", table_name="deployment_jobs")
    op.drop_index("ix_deployment_jobs_org_id_environment_id_status_id", table_name="deployment_jobs")
    op.drop_index("ix_deployment_jobs_org_id_id", table_name="deployment_jobs")
    op.drop_table("deployment_jobs")

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from service.db import Base, UTCDateTime, utcnow
from service.ids import new_id


class DeploymentJob(Base):
    """One deployment of some agents into one environment, run by a worker under a lease."""

    __tablename__ = "deployment_jobs"
    __table_args__ = (
        # Listings filter by environment and status and page newest first (ids are time-ordered).
        Index("ix_deployment_jobs_org_id_id", "org_id", "id"),
        Index(
            "ix_deployment_jobs_org_id_environment_id_status_id", "org_id", "environment_id", "status", "id"
        ),
        Index("ix_deployment_jobs_org_id_status_id", "org_id", "status", "id"),
        # The worker's claim: pending jobs, and running ones whose lease has expired.
        Index("ix_deployment_jobs_status_lease_expires_at", "status", "lease_expires_at"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=lambda: new_id("job"))
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    environment_id: Mapped[str] = mapped_column(ForeignKey("environments.id", ondelete="CASCADE"))
    status: Mapped[str] = mapped_column(String(20), default="pending")
    message: Mapped[str | None] = mapped_column(String(2000))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    # Names the worker run holding the lease, so a run that lost its lease cannot finish the job.
    lease_token: Mapped[str | None] = mapped_column(String(40))
    lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)

    agent_rows: Mapped[list[DeploymentJobAgent]] = relationship(
        cascade="all, delete-orphan", lazy="selectin", order_by="DeploymentJobAgent.stable_key"
    )

    @property
    def agents(self) -> list[DeploymentJobAgent]:
        return self.agent_rows


class DeploymentJobAgent(Base):
    """One agent of a job: the version and resolved config it deploys, and how that went."""

    __tablename__ = "deployment_job_agents"
    __table_args__ = (Index("ix_deployment_job_agents_agent_id", "agent_id"),)

    job_id: Mapped[str] = mapped_column(
        ForeignKey("deployment_jobs.id", ondelete="CASCADE"), primary_key=True
    )
    agent_id: Mapped[str] = mapped_column(ForeignKey("agents.id", ondelete="CASCADE"), primary_key=True)
    stable_key: Mapped[str] = mapped_column(String(100))
    version: Mapped[int] = mapped_column(Integer)
    # The resolved config with secret references left as references; resolved only when sent.
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    config_hash: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(20), default="pending")
    error: Mapped[str | None] = mapped_column(String(2000))


class AgentDeployment(Base):
    """What runs of an agent in an environment: the last deployment that succeeded there."""

    __tablename__ = "agent_deployments"
    __table_args__ = (
        UniqueConstraint("environment_id", "agent_id", name="uq_agent_deployments_environment_id_agent_id"),
        Index("ix_agent_deployments_org_id_agent_id", "org_id", "agent_id"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=lambda: new_id("dep"))
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    environment_id: Mapped[str] = mapped_column(ForeignKey("environments.id", ondelete="CASCADE"))
    agent_id: Mapped[str] = mapped_column(ForeignKey("agents.id", ondelete="CASCADE"))
    version: Mapped[int] = mapped_column(Integer)
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    config_hash: Mapped[str] = mapped_column(String(64))
    job_id: Mapped[str] = mapped_column(String(40))
    deployed_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class DeploymentSigningKey(Base):
    """The key an environment's webhook target verifies deployment manifests with, encrypted."""

    __tablename__ = "deployment_signing_keys"

    environment_id: Mapped[str] = mapped_column(
        ForeignKey("environments.id", ondelete="CASCADE"), primary_key=True
    )
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"), index=True)
    # Fernet token of the `whsec_…` value (see service.crypto).
    ciphertext: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from sqlalchemy import JSON, Date, Float, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from api.approvals import ChangeRequestRef
from api.deployments import Rollout
from service.storage.db import Base, UTCDateTime, WireJSON, utcnow
from service.storage.ids import new_id


class DeploymentJobRow(Base):
    """One deployment of some agents into one environment, run by a worker under a lease."""

    __tablename__ = "deployment_jobs"
    __table_args__ = (
        # Listings filter by environment and status and page newest first (ids are time-ordered).
        Index("ix_deployment_jobs_org_id_id", "org_id", "id"),
        Index(
            "ix_deployment_jobs_org_id_environment_id_status_id", "org_id", "environment_id", "status", "id"
        ),
        Index("ix_deployment_jobs_org_id_status_id", "org_id", "status", "id"),
        # History pages newest first by date within a range; an environment's newest job.
        Index("ix_deployment_jobs_org_id_created_at_id", "org_id", "created_at", "id"),
        Index(
            "ix_deployment_jobs_org_id_environment_id_created_at_id",
            "org_id",
            "environment_id",
            "created_at",
            "id",
        ),
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
    # The W3C traceparent of the request that created the job: its run continues that trace.
    trace_context: Mapped[str | None] = mapped_column(String(55))
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # The approved change request that started it, if one did: kept as it was applied (its approvals
    # never change afterwards), so that nothing reads the requests to answer a job.
    change_request: Mapped[ChangeRequestRef | None] = mapped_column(WireJSON(ChangeRequestRef))
    # The policies its agents broke and it went ahead through (audit, warn, or deny under a live
    # exception), as they were checked when it was made.
    policy_violations: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON(none_as_null=True))
    # A job with a strategy: its waves and how far it got (service.deployments.rollouts); replaced
    # whole on each change. Its `nextWaveAt` is the column below, which the worker's claim reads.
    rollout_state: Mapped[Rollout | None] = mapped_column("rollout", WireJSON(Rollout))
    next_wave_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # Starts of the wave under way: a wave whose workers keep dying is given up on, not the job's
    # count of starts, which grows by one per wave.
    wave_attempts: Mapped[int] = mapped_column(Integer, default=0)

    agent_rows: Mapped[list[DeploymentJobAgentRow]] = relationship(
        cascade="all, delete-orphan", lazy="selectin", order_by="DeploymentJobAgentRow.stable_key"
    )

    @property
    def agents(self) -> list[DeploymentJobAgentRow]:
        return self.agent_rows

    @property
    def violations(self) -> list[dict[str, Any]]:
        return self.policy_violations or []

    @property
    def rollout(self) -> Rollout | None:
        if self.rollout_state is None:
            return None
        return self.rollout_state.model_copy(update={"next_wave_at": self.next_wave_at})


class DeploymentJobAgentRow(Base):
    """One agent of a job: the version and resolved config it deploys, and how that went."""

    __tablename__ = "deployment_job_agents"
    # An agent's history, and counts of results by agent and status, read from the index alone.
    __table_args__ = (Index("ix_deployment_job_agents_agent_id_status", "agent_id", "status"),)

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
    # What the agent ran in the environment when the job was made (all None: nothing), which a
    # rollback deploys again; `rolled_back` once it has.
    previous_version: Mapped[int | None] = mapped_column(Integer)
    previous_config: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    previous_config_hash: Mapped[str | None] = mapped_column(String(64))
    rolled_back: Mapped[bool] = mapped_column(default=False)

    @property
    def running_config(self) -> dict[str, Any]:
        """The config this job left running (for an agent it deployed)."""
        return self.previous_config if self.rolled_back and self.previous_config else self.config


class AgentDeploymentRow(Base):
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


class DeploymentMonthRollupRow(Base):
    """Ended jobs of an environment per UTC day of creation (service.deployments.rollups), a month
    to a row: `jobs` and `failures` are JSON arrays with one number per day of `month`. A year's
    heatmap by day reads 13 rows per environment and sends them on as text, not 365 to format."""

    __tablename__ = "deployment_month_rollups"

    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"), primary_key=True)
    environment_id: Mapped[str] = mapped_column(
        ForeignKey("environments.id", ondelete="CASCADE"), primary_key=True
    )
    month: Mapped[date] = mapped_column(Date, primary_key=True)  # its first day
    jobs: Mapped[str] = mapped_column(Text)
    failures: Mapped[str] = mapped_column(Text)


class DeploymentHourlyRollupRow(Base):
    """Ended jobs of an environment per UTC hour of creation: what the weekday-by-hour heatmap reads."""

    __tablename__ = "deployment_hourly_rollups"
    __table_args__ = (
        Index(
            "ix_deployment_hourly_rollups_org_id_day",
            "org_id",
            "day",
            "hour",
            "environment_id",
            "jobs",
            "failures",
        ),
    )

    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"), primary_key=True)
    environment_id: Mapped[str] = mapped_column(
        ForeignKey("environments.id", ondelete="CASCADE"), primary_key=True
    )
    day: Mapped[date] = mapped_column(Date, primary_key=True)
    hour: Mapped[int] = mapped_column(Integer, primary_key=True)
    jobs: Mapped[int] = mapped_column(Integer)
    failures: Mapped[int] = mapped_column(Integer)


class DeploymentMetricRollupRow(Base):
    """An environment's delivery metrics for one UTC day or month of job creation
    (service.deployments.rollups): ended, successful and failed jobs, and two histograms of seconds
    (service.deployments.histograms) as JSON objects: job durations, and times to restore of the
    incidents that began with a failure created that day or month."""

    __tablename__ = "deployment_metric_rollups"

    # Ranges are read across environments: the key leads with the span and its start.
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"), primary_key=True)
    span: Mapped[str] = mapped_column(String(8), primary_key=True)  # "day" or "month"
    start: Mapped[date] = mapped_column(Date, primary_key=True)
    environment_id: Mapped[str] = mapped_column(
        ForeignKey("environments.id", ondelete="CASCADE"), primary_key=True
    )
    jobs: Mapped[int] = mapped_column(Integer)
    successes: Mapped[int] = mapped_column(Integer)
    failures: Mapped[int] = mapped_column(Integer)
    durations: Mapped[str] = mapped_column(Text)
    restores: Mapped[str] = mapped_column(Text)


class DeploymentAgentRollupRow(Base):
    """Agents' results in an environment per UTC day or month of their job's creation: what the
    agent-by-environment heatmap reads (service.deployments.rollups)."""

    __tablename__ = "deployment_agent_rollups"

    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"), primary_key=True)
    span: Mapped[str] = mapped_column(String(8), primary_key=True)  # "day" or "month"
    start: Mapped[date] = mapped_column(Date, primary_key=True)
    environment_id: Mapped[str] = mapped_column(
        ForeignKey("environments.id", ondelete="CASCADE"), primary_key=True
    )
    stable_key: Mapped[str] = mapped_column(String(100), primary_key=True)
    results: Mapped[int] = mapped_column(Integer)
    failures: Mapped[int] = mapped_column(Integer)


class DeploymentArrivalRow(Base):
    """An agent version's first complete deployment in an environment, with its lead time: kept at
    job end like the rollups (service.deployments.rollups), for every environment, so that marking
    one production (or changing a promotion path) changes lead times at once without recounting
    jobs; the metrics read the production environments' rows (service.deployments.leadtime)."""

    __tablename__ = "deployment_arrivals"

    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"), primary_key=True)
    environment_id: Mapped[str] = mapped_column(
        ForeignKey("environments.id", ondelete="CASCADE"), primary_key=True
    )
    agent_id: Mapped[str] = mapped_column(ForeignKey("agents.id", ondelete="CASCADE"), primary_key=True)
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    reached_at: Mapped[datetime] = mapped_column(UTCDateTime)  # the first complete job's end
    lead_seconds: Mapped[float] = mapped_column(Float)  # from the version's creation to reached_at


class DeploymentRollupVersionRow(Base):
    """How many times an org's deployment rollups have changed: moved in the transaction that
    changes them, so that an analytics answer kept under one version is never served once they
    have moved on (service.deployments.analytics_cache)."""

    __tablename__ = "deployment_rollup_versions"

    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"), primary_key=True)
    version: Mapped[int] = mapped_column(Integer)


class DeploymentStatusVersionRow(Base):
    """How many times what an org's status matrix shows has changed: moved by triggers on every
    table it reads (migration 0023), so that a matrix kept under one version is never served once
    any of them has moved on (service.deployments.matrix). No foreign key: the triggers of an
    organization's cascading delete would otherwise write a row for it as it goes."""

    __tablename__ = "deployment_status_versions"

    org_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    version: Mapped[int] = mapped_column(Integer)


class DeploymentIncidentRow(Base):
    """An environment's open incident: since its first failed job of a run ended, no job has
    completed there. The next complete job closes it and counts its time to restore."""

    __tablename__ = "deployment_incidents"

    environment_id: Mapped[str] = mapped_column(
        ForeignKey("environments.id", ondelete="CASCADE"), primary_key=True
    )
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    failed_at: Mapped[datetime] = mapped_column(UTCDateTime)  # when the run's first failure ended
    day: Mapped[date] = mapped_column(Date)  # the UTC day that failed job was created


class DeploymentStateRow(Base):
    """The status of an agent in an environment, kept current as its inputs change.

    A row exists once a job has ended for the pair (no row: not deployed). `tool_hashes` holds the
    deployed hash of each referenced tool as it was when the running config was deployed;
    `check_at` is when the pair must be evaluated again without any change (its stale deadline,
    or the next look at its pinned prompts); `cell` is the pair's `AgentStatus` as JSON text,
    written by each evaluation, which the status matrix reads as it is.
    """

    __tablename__ = "deployment_states"
    __table_args__ = (
        Index("ix_deployment_states_org_id_state", "org_id", "state"),
        Index("ix_deployment_states_environment_id", "environment_id"),
        Index("ix_deployment_states_check_at", "check_at"),
    )

    agent_id: Mapped[str] = mapped_column(ForeignKey("agents.id", ondelete="CASCADE"), primary_key=True)
    environment_id: Mapped[str] = mapped_column(
        ForeignKey("environments.id", ondelete="CASCADE"), primary_key=True
    )
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    state: Mapped[str] = mapped_column(String(20))
    since: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    tool_hashes: Mapped[dict[str, str | None]] = mapped_column(JSON, default=dict)
    error: Mapped[str | None] = mapped_column(String(2000))
    last_job_id: Mapped[str | None] = mapped_column(String(40))
    check_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    cell: Mapped[str] = mapped_column(Text, default="")


class DeploymentPolicyRow(Base):
    """An organization's deployment settings; without a row the defaults apply."""

    __tablename__ = "deployment_policies"

    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"), primary_key=True)
    stale_after_days: Mapped[int] = mapped_column(Integer)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)

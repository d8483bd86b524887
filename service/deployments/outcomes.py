"""What a deployment job leaves on record: each agent's result and what now runs (as each wave or
rollback lands), and the job's end with its rollups, states and events. The worker (runner.py) and
the job's transitions (rollouts.py) both end jobs through here."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.deployments.models import AgentDeploymentRow, DeploymentJobAgentRow, DeploymentJobRow
from service.deployments.rollups import record_job_end
from service.deployments.service import running_replaced
from service.deployments.states import record_job_outcome
from service.environments.models import EnvironmentRow
from service.events.service import record_event
from service.observability import metrics
from service.storage.db import insert_unless_taken, utcnow

# Per stableKey: None when the agent deployed, else why it failed.
Outcome = dict[str, str | None]

# A job that ends aborted had its event recorded when it was aborted (rollouts.abort).
EVENT_AT_TRANSITION = frozenset({"aborted"})


def record_results(session: Session, job: DeploymentJobRow, outcome: Outcome) -> None:
    """Record the result of each agent in `outcome`, and what runs of those that deployed."""
    replaced: dict[str, tuple[dict[str, Any] | None, dict[str, Any]]] = {}
    for row in job.agent_rows:
        if row.stable_key not in outcome:
            continue
        row.error = outcome[row.stable_key]
        row.status = "error" if row.error else "complete"
        if row.error is None:
            replaced[row.agent_id] = (record_running(session, job, row), row.config)
    if replaced:
        running_replaced(session, org_id=job.org_id, environment_id=job.environment_id, replaced=replaced)


def record_rolled_back(session: Session, job: DeploymentJobRow, rows: list[DeploymentJobAgentRow]) -> None:
    """Record that these agents run again what they ran before the job."""
    replaced: dict[str, tuple[dict[str, Any] | None, dict[str, Any]]] = {}
    for row in rows:
        row.rolled_back = True
        assert row.previous_config is not None  # only agents that ran something are rolled back
        replaced[row.agent_id] = (record_running(session, job, row), row.previous_config)
    if replaced:
        running_replaced(session, org_id=job.org_id, environment_id=job.environment_id, replaced=replaced)


def end_job(
    session: Session,
    job: DeploymentJobRow,
    *,
    status: str,
    message: str | None,
    details: dict[str, Any] | None = None,
) -> None:
    """End the job: its status and message, the rollups and states it moves, and its events (the
    `deployment.<status>` one with `details` added)."""
    job.status = status
    job.message = message or summary(job)
    job.finished_at = utcnow()
    job.lease_token = None
    job.lease_expires_at = None
    job.next_wave_at = None
    record_job_end(session, job)
    failed = [row for row in job.agent_rows if row.error]
    if status not in EVENT_AT_TRANSITION:
        agents = [
            {"stableKey": r.stable_key, "version": r.version, "status": r.status, "error": r.error}
            for r in job.agent_rows
        ]
        record_event(
            session,
            org_id=job.org_id,
            type=f"deployment.{status}",
            payload=where(session, job) | {"agents": agents} | (details or {}),
        )
    for row in failed:
        payload = where(session, job) | {
            "stableKey": row.stable_key,
            "version": row.version,
            "error": row.error,
        }
        record_event(session, org_id=job.org_id, type="agent.error", payload=payload)
    record_job_outcome(session, job=job)
    metrics.DEPLOYMENT_JOBS_ENDED.labels(state=job.status).inc()


def where(session: Session, job: DeploymentJobRow) -> dict[str, Any]:
    """What every event of a job names: the job and its environment."""
    environment = session.get(EnvironmentRow, job.environment_id)
    return {
        "jobId": job.id,
        "environmentId": job.environment_id,
        "environmentName": environment.name if environment else None,
    }


def summary(job: DeploymentJobRow) -> str:
    failed = [row for row in job.agent_rows if row.error]
    total = len(job.agent_rows)
    if not failed:
        return f"Deployed {total} agent{'s' if total != 1 else ''}"
    first = failed[0]
    return f"{len(failed)} of {total} agents failed; {first.stable_key}: {first.error}"[:2000]


def record_running(
    session: Session, job: DeploymentJobRow, row: DeploymentJobAgentRow
) -> dict[str, Any] | None:
    """What now runs of the agent in the environment (one row per pair, replaced in place): what
    the row deployed, or after its rollback what it ran before; the config it replaced (None: the
    agent did not run there)."""
    query = select(AgentDeploymentRow).where(
        AgentDeploymentRow.environment_id == job.environment_id, AgentDeploymentRow.agent_id == row.agent_id
    )
    deployed = session.scalar(query.with_for_update())
    previous = deployed.config if deployed is not None else None
    if deployed is None:
        deployed = AgentDeploymentRow(
            org_id=job.org_id, environment_id=job.environment_id, agent_id=row.agent_id
        )
        if not insert_unless_taken(session, _fill(deployed, job, row)):
            deployed = session.scalar(query.with_for_update())
            previous = deployed.config if deployed is not None else None
    if deployed is not None:
        _fill(deployed, job, row)
    session.flush()
    return previous


def _fill(
    deployed: AgentDeploymentRow, job: DeploymentJobRow, row: DeploymentJobAgentRow
) -> AgentDeploymentRow:
    if row.rolled_back:
        assert row.previous_version is not None and row.previous_config_hash is not None
        deployed.version, deployed.config_hash = row.previous_version, row.previous_config_hash
    else:
        deployed.version, deployed.config_hash = row.version, row.config_hash
    deployed.config = row.running_config
    deployed.job_id = job.id
    deployed.deployed_at = utcnow()
    return deployed

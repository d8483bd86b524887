"""The worker task that runs deployment jobs: claim one under a lease, deploy it, record the outcome.

A claim is atomic: PostgreSQL skips rows other workers hold (`FOR UPDATE SKIP LOCKED`), SQLite's
write transaction (`BEGIN IMMEDIATE`) lets one claimer in at a time. The claimer holds a lease,
extended by a heartbeat while it works. A job whose lease expired (its worker died) is claimed
again, up to MAX_ATTEMPTS starts, then failed with a message: no job stays `running` for ever. Only
the run holding the current lease may finish a job, so two runs never both record an outcome.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import httpx
from sqlalchemy import and_, or_, select, update
from sqlalchemy.orm import Session

from service.deployments.models import (
    AgentDeploymentRow,
    DeploymentJobAgentRow,
    DeploymentJobRow,
)
from service.deployments.rollups import record_job_end
from service.deployments.service import running_replaced
from service.deployments.states import record_job_outcome
from service.environments.models import DeploymentSigningKeyRow, EnvironmentRow
from service.environments.service import decrypt_secret_values
from service.events.service import record_event
from service.observability import metrics, tracing
from service.outbound.urls import OutboundRefused, check_outbound_url
from service.outbound.webhooks import signature_headers
from service.redaction.objects import hidden_values, redacted_text
from service.settings import Settings
from service.storage.crypto import DecryptionFailed, cipher_for
from service.storage.db import Database, insert_unless_taken, utcnow
from service.storage.ids import new_id

logger = logging.getLogger("orgdeck.deployments")

LEASE_SECONDS = 60
HEARTBEAT_SECONDS = 15
MAX_ATTEMPTS = 3
WEBHOOK_TIMEOUT_SECONDS = 15
SECRET_REFERENCE = re.compile(r"\$\{secret:([A-Za-z0-9_.-]+)\}")


@dataclass(frozen=True)
class JobAgent:
    stable_key: str
    version: int
    config: dict[str, Any]
    config_hash: str


@dataclass(frozen=True)
class Claim:
    job_id: str
    lease_token: str
    org_id: str
    environment_id: str
    agents: list[JobAgent]
    # The creating request's traceparent (tracing.continued).
    trace_context: str | None


# Per stableKey: None when the agent deployed, else why it failed.
Outcome = dict[str, str | None]


def run_deployment_jobs(db: Database, settings: Settings) -> bool:
    """Run one deployment job if one is waiting; True when there was work."""
    claim, found = _claim(db)
    if claim is None:
        return found
    # The run, its SQL, its webhook call and the events it records belong to the creating request's trace.
    with tracing.continued("deployment job", claim.trace_context, job_id=claim.job_id):
        with _heartbeat(db, claim):
            outcome = _deploy(db, settings, claim)
        _finish(db, claim, outcome)
    return True


def _claim(db: Database) -> tuple[Claim | None, bool]:
    """The claimed job, if any, and whether there was a job to handle (one given up on counts)."""
    now = utcnow()
    claimable = or_(
        DeploymentJobRow.status == "pending",
        and_(DeploymentJobRow.status == "running", DeploymentJobRow.lease_expires_at < now),
    )
    # A read first: an idle worker must not take SQLite's write lock every round.
    with db.session() as session:
        if session.scalar(select(DeploymentJobRow.id).where(claimable).limit(1)) is None:
            return None, False
    with db.session(write=True) as session:
        query = select(DeploymentJobRow).where(claimable).order_by(DeploymentJobRow.id).limit(1)
        job = session.scalar(query.with_for_update(skip_locked=True))
        if job is None:
            return None, False
        if job.attempts >= MAX_ATTEMPTS:
            failure = f"Gave up after {job.attempts} attempts: the worker running the job stopped responding"
            _end_job(session, job, {row.stable_key: failure for row in job.agent_rows}, message=failure)
            return None, True
        if job.status == "running":
            metrics.LEASE_TAKEOVERS.labels(kind="deployment_job").inc()
        job.status = "running"
        job.attempts += 1
        job.started_at = job.started_at or now
        job.lease_token = new_id("lease")
        job.lease_expires_at = now + timedelta(seconds=LEASE_SECONDS)
        agents = [
            JobAgent(row.stable_key, row.version, row.config, row.config_hash) for row in job.agent_rows
        ]
        return Claim(job.id, job.lease_token, job.org_id, job.environment_id, agents, job.trace_context), True


@contextmanager
def _heartbeat(db: Database, claim: Claim) -> Iterator[None]:
    """Extend the claim's lease every HEARTBEAT_SECONDS until the block ends."""
    stopped = threading.Event()

    def beat() -> None:
        while not stopped.wait(HEARTBEAT_SECONDS):
            with db.session(write=True) as session:
                session.execute(
                    update(DeploymentJobRow)
                    .where(
                        DeploymentJobRow.id == claim.job_id, DeploymentJobRow.lease_token == claim.lease_token
                    )
                    .values(lease_expires_at=utcnow() + timedelta(seconds=LEASE_SECONDS))
                )

    thread = threading.Thread(target=beat, name=f"lease-{claim.job_id}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stopped.set()
        thread.join()


def _deploy(db: Database, settings: Settings, claim: Claim) -> Outcome:
    with db.session() as session:
        environment = session.get(EnvironmentRow, claim.environment_id)
        if environment is None:
            return {agent.stable_key: "The environment was deleted" for agent in claim.agents}
        if environment.target != "webhook":
            # The builtin target: the service's own record of the deployment is the deployment.
            return {agent.stable_key: None for agent in claim.agents}
        return _deploy_to_webhook(session, settings, claim, environment)


def _deploy_to_webhook(
    session: Session, settings: Settings, claim: Claim, environment: EnvironmentRow
) -> Outcome:
    """POST the signed manifest to the environment's URL; its answer says how each agent went."""
    everyone = [agent.stable_key for agent in claim.agents]
    url = environment.webhook_url or ""
    signing_key = session.get(DeploymentSigningKeyRow, environment.id)
    if signing_key is None:
        return dict.fromkeys(everyone, "The environment has no signing key; create one and deploy again")
    cipher = cipher_for(settings)
    wanted = {name for agent in claim.agents for name in SECRET_REFERENCE.findall(json.dumps(agent.config))}
    try:
        key = cipher.decrypt(signing_key.ciphertext)
        values = decrypt_secret_values(
            session, cipher=cipher, org_id=claim.org_id, environment_id=environment.id, names=wanted
        )
    except DecryptionFailed:
        # A worker configured with other encryption keys than the service: say so rather than crash.
        return dict.fromkeys(
            everyone, "This worker cannot decrypt the environment's secrets; check its encryption keys"
        )
    outcome: Outcome = {}
    manifest_agents = []
    for agent in claim.agents:
        missing = sorted(set(SECRET_REFERENCE.findall(json.dumps(agent.config))) - set(values))
        if missing:
            outcome[agent.stable_key] = f"Secrets not found for this environment: {', '.join(missing)}"
            continue
        manifest_agents.append(
            {
                "stableKey": agent.stable_key,
                "version": agent.version,
                "configHash": agent.config_hash,
                "config": _with_secrets(agent.config, values),
            }
        )
    if not manifest_agents:
        return outcome
    manifest = {
        "jobId": claim.job_id,
        "environment": {"id": environment.id, "name": environment.name},
        "agents": manifest_agents,
    }
    sent = [agent["stableKey"] for agent in manifest_agents]
    reported: Outcome
    try:
        check_outbound_url(url, settings)
        answer = _post_signed(url, manifest, message_id=claim.job_id, key=key)
    except OutboundRefused as exc:
        reported = dict.fromkeys(sent, f"Webhook URL refused: {exc}")
    except httpx.HTTPError as exc:
        reported = dict.fromkeys(sent, f"Webhook call failed: {type(exc).__name__}: {exc}"[:500])
    else:
        reported = _results_from(answer, sent)
    # An error is shown to every reader of the job and may quote what the target was sent: the
    # secrets and credentials of the manifest never.
    hidden = set(values.values()).union(*(hidden_values(agent["config"]) for agent in manifest_agents))
    return outcome | {
        stable_key: redacted_text(error, hidden) if error else None for stable_key, error in reported.items()
    }


def _with_secrets(value: Any, secrets: dict[str, str]) -> Any:
    """A copy of `value` with every `${secret:NAME}` replaced by the secret's value."""
    if isinstance(value, dict):
        return {key: _with_secrets(item, secrets) for key, item in value.items()}
    if isinstance(value, list):
        return [_with_secrets(item, secrets) for item in value]
    if isinstance(value, str):
        return SECRET_REFERENCE.sub(lambda match: secrets[match.group(1)], value)
    return value


def _post_signed(url: str, manifest: dict[str, Any], *, message_id: str, key: str) -> httpx.Response:
    body = json.dumps(manifest, separators=(",", ":")).encode()
    headers = {"content-type": "application/json", **signature_headers(message_id, body, [key])}
    return httpx.post(url, content=body, headers=headers, timeout=WEBHOOK_TIMEOUT_SECONDS)


def _results_from(answer: httpx.Response, sent: list[str]) -> Outcome:
    """Per-agent outcome from the target's answer: `{"results": [{"stableKey", "status", "error"}]}`."""
    if not answer.is_success:
        return dict.fromkeys(sent, f"The target answered HTTP {answer.status_code}")
    try:
        reported = {item["stableKey"]: item for item in answer.json()["results"] if isinstance(item, dict)}
    except (ValueError, KeyError, TypeError):
        return dict.fromkeys(sent, "The target's answer is not a JSON object with a results list")
    outcome: Outcome = {}
    for stable_key in sent:
        item = reported.get(stable_key)
        if item is None:
            outcome[stable_key] = "The target did not report this agent"
        elif item.get("status") == "complete":
            outcome[stable_key] = None
        else:
            outcome[stable_key] = str(
                item.get("error") or f"The target reported status {item.get('status')!r}"
            )[:2000]
    return outcome


def _finish(db: Database, claim: Claim, outcome: Outcome) -> None:
    with db.session(write=True) as session:
        query = select(DeploymentJobRow).where(DeploymentJobRow.id == claim.job_id).with_for_update()
        job = session.scalar(query)
        if job is None or job.status != "running" or job.lease_token != claim.lease_token:
            logger.warning(
                "Deployment job %s: lease lost before finishing; its new holder finishes it", claim.job_id
            )
            return
        _end_job(session, job, outcome, message=None)


def _end_job(session: Session, job: DeploymentJobRow, outcome: Outcome, *, message: str | None) -> None:
    """Record each agent's result, the deployed state of those that succeeded, the job's end and events."""
    replaced: dict[str, tuple[dict[str, Any] | None, dict[str, Any]]] = {}
    for row in job.agent_rows:
        row.error = outcome.get(row.stable_key)
        row.status = "error" if row.error else "complete"
        if row.error is None:
            replaced[row.agent_id] = (_record_deployed(session, job, row), row.config)
    if replaced:
        running_replaced(session, org_id=job.org_id, environment_id=job.environment_id, replaced=replaced)
    failed = [row for row in job.agent_rows if row.error]
    job.status = "complete" if not failed else "error" if len(failed) == len(job.agent_rows) else "partial"
    job.message = message or _summary(len(job.agent_rows), failed)
    job.finished_at = utcnow()
    record_job_end(session, job)
    job.lease_token = None
    job.lease_expires_at = None
    environment = session.get(EnvironmentRow, job.environment_id)
    where = {
        "jobId": job.id,
        "environmentId": job.environment_id,
        "environmentName": environment.name if environment else None,
    }
    agents = [
        {"stableKey": r.stable_key, "version": r.version, "status": r.status, "error": r.error}
        for r in job.agent_rows
    ]
    record_event(
        session, org_id=job.org_id, type=f"deployment.{job.status}", payload=where | {"agents": agents}
    )
    for row in failed:
        payload = where | {"stableKey": row.stable_key, "version": row.version, "error": row.error}
        record_event(session, org_id=job.org_id, type="agent.error", payload=payload)
    record_job_outcome(session, job=job)
    metrics.DEPLOYMENT_JOBS_ENDED.labels(state=job.status).inc()


def _summary(total: int, failed: list[DeploymentJobAgentRow]) -> str:
    if not failed:
        return f"Deployed {total} agent{'s' if total != 1 else ''}"
    first = failed[0]
    return f"{len(failed)} of {total} agents failed; {first.stable_key}: {first.error}"[:2000]


def _record_deployed(
    session: Session, job: DeploymentJobRow, row: DeploymentJobAgentRow
) -> dict[str, Any] | None:
    """What now runs of the agent in the environment (one row per pair, replaced in place); the
    config it replaced (None: the agent did not run there)."""
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
    deployed.version = row.version
    deployed.config = row.config
    deployed.config_hash = row.config_hash
    deployed.job_id = job.id
    deployed.deployed_at = utcnow()
    return deployed

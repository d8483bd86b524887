"""The worker task that runs deployment jobs: claim one under a lease, deploy it, record the outcome.

A claim is atomic: PostgreSQL skips rows other workers hold (`FOR UPDATE SKIP LOCKED`), SQLite's
write transaction (`BEGIN IMMEDIATE`) lets one claimer in at a time. The claimer holds a lease,
extended by a heartbeat while it works. A job whose lease expired (its worker died) is claimed
again, up to MAX_ATTEMPTS starts, then failed with a message: no job stays `running` for ever. Only
the run holding the current lease may record an outcome, so two runs never both record one.

A claim does one wave of a job (service.deployments.rollouts; a job without a strategy is one wave):
it sends the wave's agents still pending, records them, verifies the wave, and ends the job or
schedules its next wave and lets the lease go. Starts are counted per wave.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import httpx
from sqlalchemy import ColumnElement, and_, or_, select, update
from sqlalchemy.orm import Session

from service.deployments import outcomes, rollouts
from service.deployments.models import DeploymentJobRow
from service.deployments.outcomes import Outcome
from service.environments.models import DeploymentSigningKeyRow, EnvironmentRow
from service.environments.service import decrypt_secret_values
from service.observability import metrics, tracing
from service.outbound.urls import OutboundRefused, check_outbound_url
from service.outbound.webhooks import signature_headers
from service.redaction.objects import hidden_values, redacted_text
from service.settings import Settings
from service.storage.crypto import DecryptionFailed, cipher_for
from service.storage.db import Database, utcnow
from service.storage.ids import new_id

logger = logging.getLogger("orgdeck.deployments")

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
    wave: int
    # The agents to send: the wave's pending ones, or (rolling back) what each ran before.
    agents: list[JobAgent]
    rolling_back: bool
    # The creating request's traceparent (tracing.continued).
    trace_context: str | None

    @property
    def message_id(self) -> str:
        """The webhook-id of what this claim sends: one per wave, or the rollback."""
        if self.rolling_back:
            return f"{self.job_id}-rollback"
        return self.job_id if self.wave == 0 else f"{self.job_id}-wave{self.wave}"


def run_deployment_jobs(db: Database, settings: Settings) -> bool:
    """Run one wave of a deployment job if one is due; True when there was work."""
    claim, found = _claim(db, settings)
    if claim is None:
        return found
    # The run, its SQL, its webhook call and the events it records belong to the creating request's trace.
    with (
        tracing.continued("deployment job", claim.trace_context, job_id=claim.job_id),
        _heartbeat(db, claim, settings.job_lease_seconds),
    ):
        if claim.rolling_back:
            _roll_back(db, settings, claim)
        else:
            _run_wave(db, settings, claim)
    return True


def _claimable(now: datetime) -> ColumnElement[bool]:
    """Jobs a worker may take: pending or running ones nobody holds whose next wave is due (a
    running job between waves holds no lease), and any whose holder's lease expired (a paused or
    aborted one too: the wave its holder had under way is finished)."""
    job = DeploymentJobRow
    free = or_(job.lease_expires_at.is_(None), job.lease_expires_at < now)
    due = or_(job.next_wave_at.is_(None), job.next_wave_at <= now)
    return or_(
        and_(job.status.in_(("pending", "running")), free, due),
        and_(job.status.in_(("paused", "aborted")), job.lease_token.is_not(None), job.lease_expires_at < now),
    )


def _claim(db: Database, settings: Settings) -> tuple[Claim | None, bool]:
    """The claimed job, if any, and whether there was a job to handle (one given up on counts)."""
    now = utcnow()
    # A read first: an idle worker must not take SQLite's write lock every round.
    with db.session() as session:
        if session.scalar(select(DeploymentJobRow.id).where(_claimable(now)).limit(1)) is None:
            return None, False
    with db.session(write=True) as session:
        query = select(DeploymentJobRow).where(_claimable(now)).order_by(DeploymentJobRow.id).limit(1)
        job = session.scalar(query.with_for_update(skip_locked=True))
        if job is None:
            return None, False
        if job.wave_attempts >= MAX_ATTEMPTS:
            failure = (
                f"Gave up after {job.wave_attempts} attempts: the worker running the job stopped responding"
            )
            rollouts.give_up(session, job, failure)
            return None, True
        if job.lease_token is not None:
            metrics.LEASE_TAKEOVERS.labels(kind="deployment_job").inc()
        if job.status == "pending":
            job.status = "running"
        job.attempts += 1
        job.wave_attempts += 1
        job.started_at = job.started_at or now
        job.lease_token = new_id("lease")
        job.lease_expires_at = now + timedelta(seconds=settings.job_lease_seconds)
        step = rollouts.next_step(job)
        if step.rollback:
            agents = [
                JobAgent(row.stable_key, row.previous_version, row.previous_config, row.previous_config_hash)  # type: ignore[arg-type]
                for row in step.rollback
            ]
        else:
            agents = [JobAgent(row.stable_key, row.version, row.config, row.config_hash) for row in step.send]
        claim = Claim(
            job.id,
            job.lease_token,
            job.org_id,
            job.environment_id,
            step.wave,
            agents,
            bool(step.rollback),
            job.trace_context,
        )
        return claim, True


@contextmanager
def _heartbeat(db: Database, claim: Claim, lease_seconds: float) -> Iterator[None]:
    """Extend the claim's lease every third of it until the block ends."""
    stopped = threading.Event()

    def beat() -> None:
        while not stopped.wait(lease_seconds / 3):
            with db.session(write=True) as session:
                session.execute(
                    update(DeploymentJobRow)
                    .where(
                        DeploymentJobRow.id == claim.job_id, DeploymentJobRow.lease_token == claim.lease_token
                    )
                    .values(lease_expires_at=utcnow() + timedelta(seconds=lease_seconds))
                )

    thread = threading.Thread(target=beat, name=f"lease-{claim.job_id}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stopped.set()
        thread.join()


def _run_wave(db: Database, settings: Settings, claim: Claim) -> None:
    """Send the wave's pending agents and record them, verify the wave, and move the job on."""
    outcome = _deploy(db, settings, claim) if claim.agents else {}
    with db.session(write=True) as session:
        job = _held(session, claim)
        if job is None:
            return
        outcomes.record_results(session, job, outcome)
        failure = rollouts.wave_failure(job, claim.wave)
        environment = session.get(EnvironmentRow, job.environment_id)
        url = environment.verification_webhook_url if environment is not None else None
        if failure is not None or url is None:
            if rollouts.finish_wave(session, job, wave=claim.wave, failure=failure, verification=None):
                _roll_back_next(session, job)
            return
        rollouts.start_verifying(job, claim.wave)
        wave_agents = rollouts.wave_rows(job, claim.wave)
        key = _signing_key(session, settings, job.environment_id)
    verification = rollouts.verify(
        settings,
        url=url,
        key=key,
        job_id=claim.job_id,
        environment_id=claim.environment_id,
        wave=claim.wave,
        agents=wave_agents,
    )
    with db.session(write=True) as session:
        job = _held(session, claim)
        if job is None:
            return
        if rollouts.finish_wave(session, job, wave=claim.wave, failure=None, verification=verification):
            _roll_back_next(session, job)


def _roll_back_next(session: Session, job: DeploymentJobRow) -> None:
    """Leave a failed wave's rollback to the next claim (any worker's, at once): each step of a
    rollout is on record before the next begins."""
    job.lease_token = None
    job.lease_expires_at = None
    job.wave_attempts = 0


def _roll_back(db: Database, settings: Settings, claim: Claim) -> None:
    """Send each agent the job changed what it ran before, and end the job rolled back."""
    outcome = _deploy(db, settings, claim) if claim.agents else {}
    with db.session(write=True) as session:
        job = _held(session, claim)
        if job is None:
            return
        done = [
            row for row in job.agent_rows if row.stable_key in outcome and outcome[row.stable_key] is None
        ]
        failures = {key: error for key, error in outcome.items() if error is not None}
        outcomes.record_rolled_back(session, job, done)
        rollouts.finish_rollback(session, job, rolled_back=done, failures=failures)


def _held(session: Session, claim: Claim) -> DeploymentJobRow | None:
    """The claim's job, locked, if the claim still holds its lease."""
    query = select(DeploymentJobRow).where(DeploymentJobRow.id == claim.job_id).with_for_update()
    job = session.scalar(query)
    if job is None or job.lease_token != claim.lease_token:
        logger.warning("Deployment job %s: lease lost; its new holder carries on", claim.job_id)
        return None
    return job


def _signing_key(session: Session, settings: Settings, environment_id: str) -> str | None:
    """The environment's signing key, decrypted (None: it has none, or this worker cannot read it)."""
    row = session.get(DeploymentSigningKeyRow, environment_id)
    if row is None:
        return None
    try:
        return cipher_for(settings).decrypt(row.ciphertext)
    except DecryptionFailed:
        return None


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
        answer = _post_signed(url, manifest, message_id=claim.message_id, key=key)
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

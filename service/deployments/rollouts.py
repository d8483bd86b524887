"""Progressive rollout: a job's agents deployed in waves, each verified, with pauses between them,
paused, resumed or aborted by a person, stopped or rolled back by a failure.

A wave is one unit of worker work (runner.py): claim the job, send the wave's agents still pending
(an agent recorded complete is never sent again), record them, verify the wave, then end the job
or schedule the next wave (`nextWaveAt`) and let the lease go. Each step is on record before the
next begins, so a worker that dies leaves the job where another takes it up. A job without a
strategy is one wave and keeps no rollout record.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta

import httpx
from sqlalchemy import select
from sqlalchemy.orm import Session

from api.deployments import (
    ABORTABLE_JOB_STATUSES,
    PAUSABLE_JOB_STATUSES,
    DeploymentJob,
    Rollout,
    RolloutWave,
    WaveVerification,
)
from service.deployments.models import DeploymentJobAgentRow, DeploymentJobRow
from service.deployments.outcomes import end_job, where
from service.errors import Conflict, NotFound
from service.events.service import record_event
from service.outbound.urls import OutboundRefused, check_outbound_url
from service.outbound.webhooks import signature_headers
from service.settings import Settings
from service.storage.db import utcnow
from service.trail.recording import record_by_worker

# -- the worker's side ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """What a claimed job needs next: its wave's pending agents sent and the wave verified, or
    (a failed wave under `rollback`) the agents it changed put back."""

    wave: int
    send: list[DeploymentJobAgentRow]
    rollback: list[DeploymentJobAgentRow]


def next_step(job: DeploymentJobRow) -> Step:
    """Called as the job is claimed: marks its wave running."""
    rollout = job.rollout_state
    if rollout is None:
        return Step(0, [row for row in job.agent_rows if row.status == "pending"], [])
    wave = rollout.waves[rollout.current_wave]
    if wave.status == "failed":  # only left so under `rollback`: its rollback is what remains
        return Step(wave.index, [], _to_roll_back(job))
    if wave.status == "pending":
        _set_wave(job, wave.index, status="running", started_at=utcnow())
    keys = set(wave.agent_stable_keys)
    return Step(
        wave.index, [row for row in job.agent_rows if row.stable_key in keys and row.status == "pending"], []
    )


def wave_rows(job: DeploymentJobRow, wave: int) -> list[DeploymentJobAgentRow]:
    if job.rollout_state is None:
        return list(job.agent_rows)
    keys = set(job.rollout_state.waves[wave].agent_stable_keys)
    return [row for row in job.agent_rows if row.stable_key in keys]


def wave_failure(job: DeploymentJobRow, wave: int) -> str | None:
    """Why the wave failed, if an agent of it did."""
    failed = [row for row in wave_rows(job, wave) if row.error]
    if not failed:
        return None
    return f"{len(failed)} agent{'s' if len(failed) != 1 else ''} failed; {failed[0].stable_key}: {failed[0].error}"


def start_verifying(job: DeploymentJobRow, wave: int) -> None:
    if job.rollout_state is not None:
        _set_wave(job, wave, status="verifying")


def verify(
    settings: Settings,
    *,
    url: str,
    key: str | None,
    job_id: str,
    environment_id: str,
    wave: int,
    agents: list[DeploymentJobAgentRow],
) -> WaveVerification:
    """Ask the environment's verification webhook about a wave: pass is a 2xx answer with
    `{"result": "pass"}`; anything else fails it, with the reason."""
    if key is None:
        return WaveVerification(
            result="fail", message="The environment has no signing key to sign the verification call"
        )
    payload = {
        "jobId": job_id,
        "environmentId": environment_id,
        "wave": wave,
        "agents": [{"stableKey": row.stable_key, "version": row.version} for row in agents],
    }
    body = json.dumps(payload, separators=(",", ":")).encode()
    headers = {"content-type": "application/json", **signature_headers(f"{job_id}-wave{wave}", body, [key])}
    try:
        check_outbound_url(url, settings)
        answer = httpx.post(url, content=body, headers=headers, timeout=settings.verification_timeout_seconds)
    except OutboundRefused as exc:
        return _failed(f"verification webhook URL refused: {exc}")
    except httpx.TimeoutException:
        return _failed(
            f"the verification webhook did not answer within {settings.verification_timeout_seconds:g} s"
        )
    except httpx.HTTPError as exc:
        return _failed(f"verification call failed: {type(exc).__name__}: {exc}")
    return _verdict(answer)


def _verdict(answer: httpx.Response) -> WaveVerification:
    if not answer.is_success:
        return _failed(f"the verification webhook answered HTTP {answer.status_code}")
    try:
        verdict = answer.json()
        result = verdict["result"]
    except (ValueError, KeyError, TypeError):
        return _failed('the verification webhook\'s answer is not a JSON object with "result"')
    if result == "pass":
        return WaveVerification(result="pass")
    message = verdict.get("message") if isinstance(verdict.get("message"), str) else None
    return _failed(message or f"the verification webhook answered result {result!r}")


def _failed(message: str) -> WaveVerification:
    return WaveVerification(result="fail", message=message[:2000])


def finish_wave(
    session: Session,
    job: DeploymentJobRow,
    *,
    wave: int,
    failure: str | None,
    verification: WaveVerification | None,
) -> bool:
    """Record how the wave went and move the job on: end it, schedule its next wave, or (a failed
    wave under `rollback`) leave it to roll back. True when a rollback is what remains."""
    rollout = job.rollout_state
    now = utcnow()
    if verification is not None and verification.result == "fail":
        failure = failure or f"verification of wave {wave + 1} failed: {verification.message}"
    if rollout is not None:
        _set_wave(
            job, wave, status="failed" if failure else "complete", finished_at=now, verification=verification
        )
    if job.status == "aborted":  # aborted while the wave was under way: no further wave, no rollback
        _skip_rest(job)
        end_job(session, job, status="aborted", message=job.message)
        return False
    if failure is not None:
        if rollout is not None and rollout.strategy.on_failure == "rollback":
            return True
        _stop(session, job, wave=wave, failure=failure)
        return False
    if rollout is None or wave + 1 == len(rollout.waves):
        end_job(session, job, status="complete", message=None)
        return False
    pause = rollout.strategy.pause_seconds
    job.rollout_state = job.rollout_state.model_copy(update={"current_wave": wave + 1})  # type: ignore[union-attr]
    job.next_wave_at = now + timedelta(seconds=pause) if pause else None
    job.wave_attempts = 0
    job.lease_token = None
    job.lease_expires_at = None
    return False


def give_up(session: Session, job: DeploymentJobRow, failure: str) -> None:
    """A wave whose workers kept dying: its agents not yet recorded fail with `failure`, the job stops."""
    rollout = job.rollout_state
    wave = rollout.current_wave if rollout is not None else 0
    for row in wave_rows(job, wave):
        if row.status == "pending":
            row.status, row.error = "error", failure
    if rollout is not None:
        _set_wave(job, wave, status="failed", finished_at=utcnow())
    if job.status == "aborted":  # its abort was recorded when it was asked for
        _skip_rest(job)
        end_job(session, job, status="aborted", message=f"{job.message}; {failure}"[:2000])
        return
    _stop(session, job, wave=wave, failure=failure)


def _stop(session: Session, job: DeploymentJobRow, *, wave: int, failure: str) -> None:
    """End a job whose wave failed under `stop`: the later waves are skipped."""
    deployed = any(row.status == "complete" for row in job.agent_rows)
    if job.rollout_state is None:
        end_job(
            session,
            job,
            status="partial" if deployed else "error",
            message=None if _agents_failed(job) else failure,
        )
        return
    skipped = _skip_rest(job)
    later = f"; {skipped} later wave{'s' if skipped != 1 else ''} skipped" if skipped else ""
    message = f"Wave {wave + 1} failed: {failure}{later}"[:2000]
    end_job(session, job, status="partial" if deployed else "error", message=message)
    record_by_worker(
        session,
        org_id=job.org_id,
        action="stopDeploymentJob",
        result=DeploymentJob.model_validate(job),
        changes={"status": job.status, "wave": wave + 1, "message": job.message},
    )


def _agents_failed(job: DeploymentJobRow) -> bool:
    return any(row.error for row in job.agent_rows)


def _to_roll_back(job: DeploymentJobRow) -> list[DeploymentJobAgentRow]:
    """The agents a rollback sends: each the job sent that ran something before it (an agent that
    failed too, for its target may have half-applied it)."""
    return [
        row
        for row in job.agent_rows
        if row.status != "pending" and row.previous_version is not None and not row.rolled_back
    ]


def finish_rollback(
    session: Session,
    job: DeploymentJobRow,
    *,
    rolled_back: list[DeploymentJobAgentRow],
    failures: dict[str, str],
) -> None:
    """End a job whose failed wave was rolled back (`rolled_back` now run what they ran before;
    `failures` could not be put back, by stable key)."""
    rollout = job.rollout_state
    assert rollout is not None
    failed_wave = rollout.waves[rollout.current_wave]
    for wave in rollout.waves[: rollout.current_wave + 1]:
        if wave.status in ("complete", "failed"):
            _set_wave(job, wave.index, status="rolled_back")
    _skip_rest(job)
    kept = [
        row.stable_key for row in job.agent_rows if row.status == "complete" and row.previous_version is None
    ]
    parts = [f"Wave {failed_wave.index + 1} failed: {_failure_of(job, failed_wave)}"]
    if rolled_back:
        parts.append(
            f"rolled back {', '.join(row.stable_key for row in rolled_back)} to the versions they ran before"
        )
    if kept:
        parts.append(f"left {', '.join(kept)} in place (they ran nothing here before)")
    if failures:
        parts.append("could not roll back " + ", ".join(f"{key}: {error}" for key, error in failures.items()))
    details = {
        "wave": failed_wave.index,
        "rolledBack": [{"stableKey": r.stable_key, "version": r.previous_version} for r in rolled_back],
        "keptInPlace": kept,
    }
    end_job(session, job, status="rolled_back", message="; ".join(parts)[:2000], details=details)
    record_by_worker(
        session,
        org_id=job.org_id,
        action="rollBackDeploymentJob",
        result=DeploymentJob.model_validate(job),
        changes={"status": job.status, "wave": failed_wave.index + 1, "message": job.message},
    )


def _failure_of(job: DeploymentJobRow, wave: RolloutWave) -> str:
    if wave.verification is not None and wave.verification.result == "fail":
        return f"verification failed: {wave.verification.message}"
    return wave_failure(job, wave.index) or "it failed"


# -- a person's side: pause, resume, abort ---------------------------------------------------------


def pause(session: Session, *, org_id: str, job_id: str, by: str) -> DeploymentJobRow:
    """Hold a rollout before its next wave; the wave under way finishes."""
    job = _locked_job(session, org_id=org_id, job_id=job_id)
    rollout = _rollout_of(job, "paused")
    if job.status not in PAUSABLE_JOB_STATUSES:
        raise Conflict(
            f"Job {job.id} is {job.status}: only a pending or running rollout pauses", code="job_not_pausable"
        )
    job.status = "paused"
    job.rollout_state = rollout.model_copy(update={"paused_at": utcnow(), "paused_by": by})
    _transition_event(session, job, "deployment.paused", by)
    return job


def resume(session: Session, *, org_id: str, job_id: str, by: str) -> DeploymentJobRow:
    """Continue a paused rollout at once (the rest of a pause between waves is skipped)."""
    job = _locked_job(session, org_id=org_id, job_id=job_id)
    rollout = _rollout_of(job, "resumed")
    if job.status != "paused":
        raise Conflict(f"Job {job.id} is {job.status}: only a paused rollout resumes", code="job_not_paused")
    job.status = "running" if job.started_at is not None else "pending"
    job.rollout_state = rollout.model_copy(update={"paused_at": None, "paused_by": None})
    job.next_wave_at = None
    _transition_event(session, job, "deployment.resumed", by)
    return job


def abort(session: Session, *, org_id: str, job_id: str, by: str) -> DeploymentJobRow:
    """Start no further wave: the job ends `aborted` (at once, or once the wave under way is on
    record). What it deployed stays; nothing is rolled back. A job without a strategy deploys all
    at once, so it can be aborted only while pending (then nothing deploys)."""
    job = _locked_job(session, org_id=org_id, job_id=job_id)
    if job.status not in ABORTABLE_JOB_STATUSES:
        raise Conflict(f"Job {job.id} is {job.status}: it can no longer be aborted", code="job_not_abortable")
    if job.rollout_state is None and job.status != "pending":
        raise Conflict(
            f"Job {job.id} has no strategy and is under way: it deploys all at once, so it can be aborted "
            "only while pending",
            code="job_not_abortable",
        )
    message = f"Aborted by {by}"
    if job.lease_token is not None:  # a wave is under way: its worker ends the job once it is on record
        job.status = "aborted"
        job.message = f"{message}; the wave under way finishes first"
    else:
        _skip_rest(job)
        end_job(session, job, status="aborted", message=message)
    _transition_event(session, job, "deployment.aborted", by)
    return job


def _locked_job(session: Session, *, org_id: str, job_id: str) -> DeploymentJobRow:
    job = session.scalar(
        select(DeploymentJobRow)
        .where(DeploymentJobRow.id == job_id, DeploymentJobRow.org_id == org_id)
        .with_for_update()
    )
    if job is None:
        raise NotFound(f"No deployment job '{job_id}' in this organization", field="jobId")
    return job


def _rollout_of(job: DeploymentJobRow, what: str) -> Rollout:
    if job.rollout_state is None:
        raise Conflict(
            f"Job {job.id} has no strategy: it deploys all at once and cannot be {what}", code="not_a_rollout"
        )
    return job.rollout_state


def _transition_event(session: Session, job: DeploymentJobRow, event_type: str, by: str) -> None:
    wave = job.rollout_state.current_wave if job.rollout_state is not None else 0
    payload = where(session, job) | {"status": job.status, "wave": wave, "by": by}
    record_event(session, org_id=job.org_id, type=event_type, payload=payload)


def _set_wave(job: DeploymentJobRow, index: int, **changes: object) -> None:
    """Replace the stored rollout with one whose wave `index` has these fields changed (a JSON
    column is written when it is assigned anew, not when changed in place)."""
    rollout = job.rollout_state
    assert rollout is not None
    waves = list(rollout.waves)
    waves[index] = waves[index].model_copy(update=changes)
    job.rollout_state = rollout.model_copy(update={"waves": waves})


def _skip_rest(job: DeploymentJobRow) -> int:
    """Mark the waves not yet begun skipped; how many."""
    rollout = job.rollout_state
    if rollout is None:
        return 0
    pending = [wave.index for wave in rollout.waves if wave.status == "pending"]
    for index in pending:
        _set_wave(job, index, status="skipped")
    return len(pending)

"""Promotion: deploying to an environment what runs complete in the one before it, and the gates
(`requirePromotion`, `soakMinutes`) that hold a deployment until its versions ran there first."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from api.deployments import DeploymentRequest, PromotionRequest
from service.agents.models import AgentRow
from service.deployments.models import AgentDeploymentRow, DeploymentJobAgentRow, DeploymentJobRow
from service.environments.models import EnvironmentRow
from service.errors import InvalidInput
from service.storage.db import utcnow

# What a deployment carries that the target environment decides, not the one promoted from.
TARGET_KEYS = ("policies", "policyBundleHash")


def promotion_request(session: Session, *, org_id: str, request: PromotionRequest) -> DeploymentRequest:
    """The deployment a promotion makes: to `to`, of each agent (all, or those named) running in
    `from`, pinned to the version running there; the configs follow from `promotedFrom`."""
    source = _environment(session, org_id=org_id, environment_id=request.from_environment_id, field="from")
    target = _environment(session, org_id=org_id, environment_id=request.to, field="to")
    if source.id == target.id:
        raise InvalidInput("from and to name the same environment", field="to")
    running = running_in(session, environment_id=source.id, stable_keys=request.agent_stable_keys)
    if not running:
        raise InvalidInput(f"No agent runs in environment '{source.name}' to promote", field="from")
    return DeploymentRequest(
        org_slug=request.org_slug,
        environment_id=target.id,
        agent_stable_keys=list(running),
        agent_versions={key: deployed.version for key, deployed in running.items()},
        promoted_from=source.id,
        strategy=request.strategy,
    )


def running_in(
    session: Session, *, environment_id: str, stable_keys: Sequence[str] | None
) -> dict[str, AgentDeploymentRow]:
    """What runs complete in the environment, by stable key (of those named, each of which must)."""
    query = (
        select(AgentRow.stable_key, AgentDeploymentRow)
        .join(AgentRow, AgentRow.id == AgentDeploymentRow.agent_id)
        .where(AgentDeploymentRow.environment_id == environment_id, AgentRow.archived_at.is_(None))
        .order_by(AgentRow.stable_key)
    )
    if stable_keys is not None:
        query = query.where(AgentRow.stable_key.in_(stable_keys))
    running = {key: deployed for key, deployed in session.execute(query)}
    absent = [key for key in dict.fromkeys(stable_keys or []) if key not in running]
    if absent:
        raise InvalidInput(
            f"Not running in the environment promoted from: {', '.join(absent)}", field="agentStableKeys"
        )
    return running


def promoted_configs(
    session: Session, *, org_id: str, request: DeploymentRequest, versions: dict[str, int]
) -> dict[str, dict[str, object]]:
    """By stable key, the config each agent runs with in `promotedFrom` (without what the target
    decides): the same version, prompt pins, model, tools and provider config. Each must run the
    version being deployed there (else what runs there moved since the request was made)."""
    assert request.promoted_from is not None
    overrides = [
        name
        for name in ("prompt_name", "version", "model", "tool_refs", "agent_provider_config")
        if getattr(request, name) is not None
    ]
    if overrides:
        raise InvalidInput(
            "promotedFrom deploys configs as they run there; leave out promptName, version, model, "
            "toolRefs and agentProviderConfig",
            field="promotedFrom",
        )
    _environment(session, org_id=org_id, environment_id=request.promoted_from, field="promotedFrom")
    running = running_in(session, environment_id=request.promoted_from, stable_keys=list(versions))
    moved = [
        f"{key} runs version {running[key].version}"
        for key, number in versions.items()
        if running[key].version != number
    ]
    if moved:
        raise InvalidInput(
            f"What runs in the environment promoted from changed: {', '.join(moved)}", field="promotedFrom"
        )
    return {
        key: {name: value for name, value in deployed.config.items() if name not in TARGET_KEYS}
        for key, deployed in running.items()
    }


@dataclass(frozen=True)
class Gate:
    """What holds one version back from an environment with `requirePromotion`: `message` in
    words, and (where that is what holds it) the minutes of soak left or when it failed there."""

    message: str
    soak_minutes_left: int | None = None
    failed_at: datetime | None = None


def promotion_blocks(
    session: Session, *, environment: EnvironmentRow, versions: dict[str, tuple[str, int]]
) -> list[str]:
    """What holds back a deployment of these versions (by agent id: stable key and version) to an
    environment with `requirePromotion`, in words: each version not running complete in the
    environment it promotes from, or not yet for `soakMinutes`, or with a failed job there since."""
    return [
        gate.message for gate in promotion_gates(session, environment=environment, versions=versions).values()
    ]


def promotion_gates(
    session: Session, *, environment: EnvironmentRow, versions: dict[str, tuple[str, int]]
) -> dict[str, Gate]:
    """`promotion_blocks`, by agent id: only the agents held back, each with what holds it."""
    if not environment.require_promotion or environment.promotes_from is None:
        return {}
    source = session.get(EnvironmentRow, environment.promotes_from)
    assert source is not None  # deleting an environment clears the paths from it
    running = {
        row.agent_id: row
        for row in session.scalars(
            select(AgentDeploymentRow).where(
                AgentDeploymentRow.environment_id == source.id, AgentDeploymentRow.agent_id.in_(versions)
            )
        )
    }
    failed_since = _failed_since(session, source_id=source.id, running=running)
    now = utcnow()
    gates = {}
    for agent_id, (stable_key, version) in versions.items():
        deployed = running.get(agent_id)
        what = f"{stable_key} version {version}"
        if deployed is None or deployed.version != version:
            gates[agent_id] = Gate(f"{what} must run complete in '{source.name}' first")
        elif agent_id in failed_since:
            gates[agent_id] = Gate(
                f"{what} failed in '{source.name}' since it began running there; fix it there first",
                failed_at=failed_since[agent_id],
            )
        elif (left := _soak_left(deployed.deployed_at, environment.soak_minutes, now)) > timedelta(0):
            gates[agent_id] = Gate(
                f"{what} must run in '{source.name}' for {environment.soak_minutes} min first "
                f"({_minutes(left)} min left)",
                soak_minutes_left=_minutes(left),
            )
    return gates


def _failed_since(
    session: Session, *, source_id: str, running: dict[str, AgentDeploymentRow]
) -> dict[str, datetime]:
    """The agents with a job that failed for them in the environment after what runs there began,
    each with the first such job's time."""
    if not running:
        return {}
    query = (
        select(DeploymentJobAgentRow.agent_id, DeploymentJobRow.created_at)
        .join(DeploymentJobRow, DeploymentJobRow.id == DeploymentJobAgentRow.job_id)
        .where(
            DeploymentJobRow.environment_id == source_id,
            DeploymentJobAgentRow.agent_id.in_(running),
            DeploymentJobAgentRow.status == "error",
        )
        .order_by(DeploymentJobRow.created_at.desc())
    )
    # Newest first, so that each agent keeps its first failure since.
    return {
        agent_id: created_at
        for agent_id, created_at in session.execute(query)
        if created_at >= running[agent_id].deployed_at
    }


def _soak_left(since: datetime, soak_minutes: int, now: datetime) -> timedelta:
    return since + timedelta(minutes=soak_minutes) - now


def _minutes(left: timedelta) -> int:
    return -(-int(left.total_seconds()) // 60)  # whole minutes, rounded up


def review_payload(request: DeploymentRequest) -> str:
    """The body of the change request a promotion to a protected environment opens, in words."""
    return json.dumps(request.model_dump(mode="json", exclude_none=True, exclude={"org_slug"}))


def _environment(session: Session, *, org_id: str, environment_id: str, field: str) -> EnvironmentRow:
    environment = session.scalar(
        select(EnvironmentRow).where(EnvironmentRow.id == environment_id, EnvironmentRow.org_id == org_id)
    )
    if environment is None:
        raise InvalidInput(
            f"{field} '{environment_id}' names no environment of this organization", field=field
        )
    return environment

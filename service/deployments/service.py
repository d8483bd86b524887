"""Deployments: what a deployment would change (preview), jobs that carry it out, and their reads."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Row, and_, func, or_, select
from sqlalchemy.orm import Session

from api.agents import canonical_json
from api.approvals import ChangeRequestRef
from api.deployments import (
    FINISHED_JOB_STATUSES,
    JOB_STATUSES,
    AgentPreview,
    DeploymentRequest,
    FieldChange,
    FleetDeploymentRequest,
    PreviewWarning,
    Rollout,
    RolloutStrategy,
    RolloutWave,
)
from api.governance import Violation
from service.agents.models import AgentRow, AgentVersionRow
from service.deployments import promotion
from service.deployments.diffs import diff_deployment
from service.deployments.facts import load_prompts, readable_prompt
from service.deployments.models import (
    AgentDeploymentRow,
    DeploymentJobAgentRow,
    DeploymentJobRow,
)
from service.environments import service as environments
from service.environments.models import DeploymentSigningKeyRow, EnvironmentRow
from service.environments.protection import require_review_of_deployment, require_review_of_environment
from service.errors import InvalidInput, NotFound, PromotionRequired
from service.events.hooks import Hook
from service.fleets.service import get_fleet
from service.observability import tracing
from service.outbound.webhooks import new_secret
from service.redaction.objects import restored
from service.storage.crypto import Cipher, reencrypt_column
from service.storage.db import utcnow
from service.tools.models import ToolRow

# Policies are checked on every deployment about to run, and shown on its preview.
policies_checked: Hook[list[Violation]] = Hook(
    "a deployment is about to run", attached_by="service.governance.evaluation"
)


# A job ended and replaced what runs of its agents in its environment: by agent id, the config that
# ran before (None: nothing did) and the one that runs now. New violations in what runs are announced.
running_replaced: Hook[None] = Hook(
    "a deployment replaced what runs", attached_by="service.governance.evaluation"
)


# The policies that apply to each agent in an environment, `{id, name, version, ruleText}` each:
# a deployment carries them to its target, and a change of them makes what runs drift.
applied_policies: Hook[dict[str, list[dict[str, Any]]]] = Hook(
    "a deployment carries the policies that apply", attached_by="service.governance.evaluation"
)


def policy_bundles(
    session: Session, *, org_id: str, environment: EnvironmentRow, agents: Sequence[AgentRow]
) -> dict[str, list[dict[str, Any]]]:
    """By agent id: the policies that apply to it in the environment (none: left out)."""
    answers = applied_policies(session, org_id=org_id, environment=environment, agents=agents)
    return {agent_id: bundle for answer in answers for agent_id, bundle in answer.items() if bundle}


def with_policies(
    config: dict[str, Any], bundle: list[dict[str, Any]], hashes: dict[tuple[Any, ...], str]
) -> dict[str, Any]:
    """The config an agent is deployed with and the policies it receives, with their hash (which
    states.py compares with the current one to tell drift). Agents in the same scopes get the same
    bundle: `hashes` keeps each one's hash, by its policies' ids and versions, for the next agent."""
    if not bundle:
        return config
    key = tuple((policy["id"], policy["version"]) for policy in bundle)
    if key not in hashes:
        hashes[key] = bundle_hash(bundle)
    return config | {"policies": bundle, "policyBundleHash": hashes[key]}


def bundle_hash(bundle: list[dict[str, Any]]) -> str:
    return hashlib.sha256(canonical_json(bundle).encode()).hexdigest()


@dataclass(frozen=True)
class PlannedAgent:
    """One agent of a deployment: the version it would run and the config it would run with."""

    agent: AgentRow
    version: int
    config: dict[str, Any]
    config_hash: str
    current: AgentDeploymentRow | None

    def changes(self) -> list[FieldChange]:
        return diff_deployment(self.current, self.version, self.config)

    @property
    def status(self) -> str:
        if self.current is None:
            return "added"
        return "changed" if self.changes() else "unchanged"


def plan_deployment(
    session: Session, *, org_id: str, request: DeploymentRequest
) -> tuple[EnvironmentRow, list[PlannedAgent]]:
    """Check a deployment request and resolve, per agent, what it would deploy. Writes nothing."""
    if (request.prompt_name is None) != (request.version is None):
        missing = "version" if request.version is None else "promptName"
        raise InvalidInput(
            f"promptName and version pin a prompt together; {missing} is missing", field=missing
        )
    environment = _environment(session, org_id=org_id, environment_id=request.environment_id)
    agents = _agents(session, org_id=org_id, stable_keys=request.agent_stable_keys)
    _check_tool_refs(session, org_id=org_id, tool_refs=request.tool_refs or [])
    versions = _versions(session, agents=agents, wanted=request.agent_versions or {})
    _check_prompt_pin(session, org_id=org_id, request=request, versions=list(versions.values()))
    promoted = (
        promotion.promoted_configs(
            session,
            org_id=org_id,
            request=request,
            versions={agent.stable_key: versions[agent.id].number for agent in agents},
        )
        if request.promoted_from is not None
        else {}
    )
    current = _current_deployments(session, environment_id=environment.id, agent_ids=[a.id for a in agents])
    bundles = policy_bundles(session, org_id=org_id, environment=environment, agents=agents)
    bundle_hashes: dict[tuple[Any, ...], str] = {}
    planned = []
    for agent in agents:
        version = versions[agent.id]
        own = promoted.get(agent.stable_key) or resolved_config(version.snapshot, request)
        config = with_policies(own, bundles.get(agent.id, []), bundle_hashes)
        planned.append(
            PlannedAgent(
                agent=agent,
                version=version.number,
                config=config,
                config_hash=config_hash(config),
                current=current.get(agent.id),
            )
        )
    return environment, planned


def preview_warnings(
    session: Session, environment: EnvironmentRow, planned: Sequence[PlannedAgent]
) -> list[PreviewWarning]:
    """What would stop the previewed deployment from being made, said before anyone tries."""
    missing_key = _missing_signing_key(session, environment)
    held = [
        PreviewWarning(code=PromotionRequired.code, message=block)
        for block in promotion_blocks(session, environment, planned)
    ]
    return ([missing_key] if missing_key is not None else []) + held


def promotion_blocks(
    session: Session, environment: EnvironmentRow, planned: Sequence[PlannedAgent]
) -> list[str]:
    versions = {plan.agent.id: (plan.agent.stable_key, plan.version) for plan in planned}
    return promotion.promotion_blocks(session, environment=environment, versions=versions)


def _missing_signing_key(session: Session, environment: EnvironmentRow) -> PreviewWarning | None:
    signs = environment.target == "webhook" or environment.verification_webhook_url is not None
    if not signs or session.get(DeploymentSigningKeyRow, environment.id) is not None:
        return None
    what = "a webhook target" if environment.target == "webhook" else "verified by a webhook"
    return PreviewWarning(
        code="signing_key_missing",
        message=f"Environment '{environment.name}' is {what} without a signing key, so "
        "deployments to it are refused: create one with POST /agents/deployments/signing-key and "
        "configure the receiver with it",
    )


def policy_violations(
    session: Session,
    *,
    org_id: str,
    environment: EnvironmentRow,
    planned: Sequence[PlannedAgent],
    deployment: dict[str, Any],
    enforce: bool,
) -> list[Violation]:
    """The policies the planned agents break; enforced, a deny one refuses the deployment.
    `deployment` is the CEL input's `{actor, viaChangeRequest, action}`."""
    answers = policies_checked(
        session,
        org_id=org_id,
        environment=environment,
        planned=planned,
        deployment=deployment,
        enforce=enforce,
    )
    return [violation for answer in answers for violation in answer]


def agent_previews(planned: Sequence[PlannedAgent]) -> list[AgentPreview]:
    """What each planned agent changes, as a preview shows it."""
    return [
        AgentPreview(
            stable_key=plan.agent.stable_key,
            status=plan.status,
            current_version=plan.current.version if plan.current else None,
            target_version=plan.version,
            changes=plan.changes(),
        )
        for plan in planned
    ]


def create_job(
    session: Session,
    *,
    org_id: str,
    request: DeploymentRequest,
    actor: str,
    action: str = "deploy",
    change_request: ChangeRequestRef | None = None,
) -> DeploymentJobRow:
    """A pending job deploying the request's agents; a worker picks it up. A protected environment
    takes it only from an approved change request (`change_request`, which the job names). `actor`
    (a member's email or a key's name) and `action` are what policy checks read of it."""
    environment, planned = plan_deployment(session, org_id=org_id, request=request)
    if change_request is None:
        promoting = request.promoted_from is not None
        require_review_of_deployment(
            environment,
            payload=promotion.review_payload(request) if promoting else "this request's body",
            field="to" if promoting else "environmentId",
        )
    blocks = promotion_blocks(session, environment, planned)
    if blocks:
        raise PromotionRequired(blocks)
    deployment = {"actor": actor, "viaChangeRequest": change_request is not None, "action": action}
    violations = policy_violations(
        session, org_id=org_id, environment=environment, planned=planned, deployment=deployment, enforce=True
    )
    missing_key = _missing_signing_key(session, environment)
    if missing_key is not None:
        raise InvalidInput(missing_key.message, field="environmentId", code=missing_key.code)
    job = DeploymentJobRow(
        org_id=org_id,
        environment_id=environment.id,
        change_request=change_request,
        trace_context=tracing.current_traceparent(),
        policy_violations=[v.model_dump(mode="json", by_alias=True) for v in violations] or None,
        rollout_state=planned_rollout(request.strategy, [plan.agent.stable_key for plan in planned]),
        agent_rows=[
            DeploymentJobAgentRow(
                agent_id=plan.agent.id,
                stable_key=plan.agent.stable_key,
                version=plan.version,
                config=plan.config,
                config_hash=plan.config_hash,
                previous_version=plan.current.version if plan.current else None,
                previous_config=plan.current.config if plan.current else None,
                previous_config_hash=plan.current.config_hash if plan.current else None,
            )
            for plan in planned
        ],
    )
    session.add(job)
    session.flush()
    return job


def planned_rollout(strategy: RolloutStrategy | None, stable_keys: list[str]) -> Rollout | None:
    """The waves of a new job with a strategy (in the order its agents were named); None without one."""
    if strategy is None:
        return None
    size = strategy.wave_count(len(stable_keys))
    waves = [
        RolloutWave(index=index, agent_stable_keys=stable_keys[start : start + size])
        for index, start in enumerate(range(0, len(stable_keys), size))
    ]
    return Rollout(strategy=strategy, waves=waves)


def create_fleet_job(
    session: Session, *, org_id: str, fleet_id: str, request: FleetDeploymentRequest, actor: str
) -> DeploymentJobRow:
    """A pending job deploying every agent of the fleet (each its latest version)."""
    fleet = get_fleet(session, org_id=org_id, fleet_id=fleet_id)
    stable_keys = [agent.stable_key for agent in fleet.agents]
    if not stable_keys:
        raise InvalidInput(f"Fleet '{fleet.name}' has no agents to deploy", field="fleetId")
    request = DeploymentRequest(
        org_slug=request.org_slug,
        environment_id=request.environment_id,
        agent_stable_keys=stable_keys,
        strategy=request.strategy,
    )
    return create_job(session, org_id=org_id, request=request, actor=actor, action="fleetDeploy")


@environments.newest_jobs.attach
def last_deployments(session: Session, *, environment_ids: Sequence[str]) -> dict[str, Row[Any]]:
    """The newest job of each environment that has one, in one query (one index seek each)."""
    if not environment_ids:
        return {}
    newest = (
        select(DeploymentJobRow.id)
        .where(
            DeploymentJobRow.org_id == EnvironmentRow.org_id,
            DeploymentJobRow.environment_id == EnvironmentRow.id,
        )
        .order_by(DeploymentJobRow.created_at.desc(), DeploymentJobRow.id.desc())
        .limit(1)
        .correlate(EnvironmentRow)
        .scalar_subquery()
    )
    query = select(
        DeploymentJobRow.id,
        DeploymentJobRow.environment_id,
        DeploymentJobRow.status,
        DeploymentJobRow.created_at,
        DeploymentJobRow.finished_at,
    ).where(DeploymentJobRow.id.in_(select(newest).where(EnvironmentRow.id.in_(environment_ids))))
    return {row.environment_id: row for row in session.execute(query)}


@environments.leaving.attach
def refuse_while_deployed(session: Session, *, environment: EnvironmentRow) -> None:
    """An environment where agents run is not deleted (400 `in_use`); archived agents do not count."""
    deployed = session.scalar(
        select(func.count())
        .select_from(AgentDeploymentRow)
        .join(AgentRow, AgentRow.id == AgentDeploymentRow.agent_id)
        .where(AgentDeploymentRow.environment_id == environment.id, AgentRow.archived_at.is_(None))
    )
    if deployed:
        agents = "1 agent is" if deployed == 1 else f"{deployed} agents are"
        raise InvalidInput(
            f"Environment '{environment.name}' cannot be deleted while agents run there: {agents} "
            "deployed to it (archived agents do not count)",
            field="environmentId",
            code="in_use",
        )


def parse_statuses(
    values: Sequence[str], *, allowed: Sequence[str] = JOB_STATUSES, field: str = "status"
) -> list[str]:
    """Values given repeated (`status=a&status=b`) or comma-separated (`status=a,b`), checked."""
    statuses = [part.strip() for value in values for part in value.split(",") if part.strip()]
    if values and not statuses:
        raise InvalidInput(f"{field} is empty: give one or more of {', '.join(allowed)}", field=field)
    unknown = [status for status in statuses if status not in allowed]
    if unknown:
        raise InvalidInput(
            f"Unknown {field} {', '.join(repr(s) for s in unknown)}; use {', '.join(allowed)}",
            field=field,
        )
    return statuses


def locked_environment(session: Session, *, org_id: str, environment_id: str) -> EnvironmentRow:
    """The environment, its row locked until the transaction ends: approved deployments to it take
    turns, each seeing what the one before it started."""
    return _environment(session, org_id=org_id, environment_id=environment_id, lock=True)


def job_under_way(
    session: Session, *, org_id: str, environment_id: str, stable_keys: Sequence[str]
) -> str | None:
    """A job not yet ended that deploys any of these agents to the environment, if there is one
    (an aborted one whose wave under way is not yet on record counts: it still holds its lease)."""
    job, agent = DeploymentJobRow, DeploymentJobAgentRow
    unfinished = [status for status in JOB_STATUSES if status not in FINISHED_JOB_STATUSES]
    return session.scalar(
        select(job.id)
        .join(agent, agent.job_id == job.id)
        .where(
            job.org_id == org_id,
            job.environment_id == environment_id,
            or_(job.status.in_(unfinished), job.lease_token.is_not(None)),
            agent.stable_key.in_(stable_keys),
        )
        .limit(1)
    )


def get_job(session: Session, *, org_id: str, job_id: str) -> DeploymentJobRow:
    """A job of the org; another org's job is 404 exactly like an unknown one."""
    job = session.scalar(
        select(DeploymentJobRow).where(DeploymentJobRow.id == job_id, DeploymentJobRow.org_id == org_id)
    )
    if job is None:
        raise NotFound(f"No deployment job '{job_id}' in this organization", field="jobId")
    return job


def create_signing_key(
    session: Session, *, cipher: Cipher, org_id: str, environment_id: str
) -> tuple[DeploymentSigningKeyRow, str]:
    """A new signing key for the environment's webhook target (replacing any), and its value."""
    value = new_secret()
    key = install_signing_key(
        session, org_id=org_id, environment_id=environment_id, ciphertext=cipher.encrypt(value)
    )
    return key, value


def install_signing_key(
    session: Session, *, org_id: str, environment_id: str, ciphertext: str, reviewed: bool = False
) -> DeploymentSigningKeyRow:
    """Make a key already encrypted (a change request carries it so) the environment's signing key,
    replacing any; a protected environment's only by an approved change request (`reviewed`)."""
    environment = _environment(session, org_id=org_id, environment_id=environment_id)
    if not reviewed:
        require_review_of_environment(environment, "signingKey", field="environmentId")
    key = session.get(DeploymentSigningKeyRow, environment.id)
    if key is None:
        key = DeploymentSigningKeyRow(environment_id=environment.id, org_id=org_id, ciphertext="")
        session.add(key)
    key.ciphertext = ciphertext
    key.created_at = utcnow()  # a replaced key is a new key
    session.flush()
    return key


def rotate_signing_keys(session: Session, *, cipher: Cipher) -> int:
    """Re-encrypt every environment's deployment signing key under the first configured key."""
    return reencrypt_column(session, cipher=cipher, column=DeploymentSigningKeyRow.ciphertext)


def resolved_config(snapshot: dict[str, Any], request: DeploymentRequest) -> dict[str, Any]:
    """What an agent version runs with once the request's overrides are applied (a credential sent
    as its placeholder keeps the version's value)."""
    overrides = restored(
        request.agent_provider_config or {}, snapshot["providerConfig"], field="agentProviderConfig"
    )
    provider_config = {**snapshot["providerConfig"], **overrides}
    pins = {request.prompt_name: request.version} if request.prompt_name and request.version else {}
    return {
        "name": snapshot["name"],
        "provider": snapshot["provider"],
        "providerConfig": provider_config,
        "model": request.model or provider_config.get("model"),
        "promptReferences": snapshot["promptReferences"],
        "promptPins": pins,
        "toolRefs": sorted(set(request.tool_refs or [])),
    }


def config_hash(config: dict[str, Any]) -> str:
    """The hash of what an agent runs with; its policies count through their policyBundleHash."""
    hashed = {key: value for key, value in config.items() if key != "policies"}
    return hashlib.sha256(canonical_json(hashed).encode()).hexdigest()


def _environment(session: Session, *, org_id: str, environment_id: str, lock: bool = False) -> EnvironmentRow:
    query = select(EnvironmentRow).where(EnvironmentRow.id == environment_id, EnvironmentRow.org_id == org_id)
    environment = session.scalar(query.with_for_update() if lock else query)
    if environment is None:
        raise InvalidInput(
            f"environmentId '{environment_id}' names no environment of this organization",
            field="environmentId",
        )
    return environment


def _agents(session: Session, *, org_id: str, stable_keys: Sequence[str]) -> list[AgentRow]:
    wanted = list(dict.fromkeys(stable_keys))
    query = select(AgentRow).where(
        AgentRow.org_id == org_id, AgentRow.stable_key.in_(wanted), AgentRow.archived_at.is_(None)
    )
    found = {agent.stable_key: agent for agent in session.scalars(query)}
    unknown = [key for key in wanted if key not in found]
    if unknown:
        raise InvalidInput(f"Unknown agents: {', '.join(unknown)}", field="agentStableKeys")
    unversioned = [key for key in wanted if found[key].latest_version is None]
    if unversioned:
        raise InvalidInput(
            f"Agents without a version (snapshot them first): {', '.join(unversioned)}",
            field="agentStableKeys",
        )
    return [found[key] for key in wanted]


def _versions(
    session: Session, *, agents: list[AgentRow], wanted: dict[str, int]
) -> dict[str, AgentVersionRow]:
    """The version each agent deploys: the one `wanted` names, else its latest."""
    by_key = {agent.stable_key: agent for agent in agents}
    strangers = sorted(set(wanted) - set(by_key))
    if strangers:
        raise InvalidInput(
            f"agentVersions names agents not being deployed: {', '.join(strangers)}", field="agentVersions"
        )
    numbers = {agent.id: wanted.get(agent.stable_key, agent.latest_version) for agent in agents}
    pairs = [
        and_(AgentVersionRow.agent_id == agent_id, AgentVersionRow.number == n)
        for agent_id, n in numbers.items()
    ]
    found = {row.agent_id: row for row in session.scalars(select(AgentVersionRow).where(or_(*pairs)))}
    missing = [f"{agent.stable_key}@{numbers[agent.id]}" for agent in agents if agent.id not in found]
    if missing:
        raise InvalidInput(f"No such agent versions: {', '.join(missing)}", field="agentVersions")
    return found


def _check_prompt_pin(
    session: Session, *, org_id: str, request: DeploymentRequest, versions: list[AgentVersionRow]
) -> None:
    """A pin names a prompt reference of every agent deployed, and a version of the artifact each of
    those references names, in a registry the organization may read (its own, or a public one)."""
    name, pinned = request.prompt_name, request.version
    if name is None or pinned is None:
        return
    references = {
        version.stable_key: (version.snapshot.get("promptReferences") or {}).get(name) for version in versions
    }
    lacking = sorted(stable_key for stable_key, reference in references.items() if reference is None)
    if lacking:
        raise InvalidInput(
            f"promptName '{name}' is not a prompt reference of {', '.join(lacking)}", field="promptName"
        )
    prompts = load_prompts(session, references.values())
    for reference in sorted(set(references.values())):
        prompt = readable_prompt(prompts, reference, org_id=org_id)
        if prompt is None:
            raise InvalidInput(
                f"promptName '{name}' refers to '{reference}', which names no prompt artifact this "
                "organization can read",
                field="promptName",
            )
        if all(known.version != pinned for known in prompt.versions):
            artifact = reference.partition("@")[0]
            raise InvalidInput(f"version '{pinned}' is not a version of '{artifact}'", field="version")


def _check_tool_refs(session: Session, *, org_id: str, tool_refs: Sequence[str]) -> None:
    if not tool_refs:
        return
    known = set(
        session.scalars(
            select(ToolRow.tool_key).where(ToolRow.org_id == org_id, ToolRow.tool_key.in_(tool_refs))
        )
    )
    unknown = sorted(set(tool_refs) - known)
    if unknown:
        raise InvalidInput(
            f"toolRefs names no tool of this organization: {', '.join(unknown)}", field="toolRefs"
        )


def _current_deployments(
    session: Session, *, environment_id: str, agent_ids: list[str]
) -> dict[str, AgentDeploymentRow]:
    query = select(AgentDeploymentRow).where(
        AgentDeploymentRow.environment_id == environment_id, AgentDeploymentRow.agent_id.in_(agent_ids)
    )
    return {row.agent_id: row for row in session.scalars(query)}

"""Where policies meet what runs: the one place their checks are evaluated, for a deployment about to
run (attached to service.deployments' hook, which sits below governance) and for what runs now.

A policy with a check applies to an agent in an environment when both are in its scope. A `fail`
or an `error` outcome (the check could not be evaluated) is a violation: an error never lets a deny
through. A deny violation refuses the deployment unless a live exception covers its agent or
environment."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from api.governance import (
    AppliedPolicy,
    Compliance,
    ComplianceCell,
    ComplianceViolation,
    ImpactEntry,
    PolicyScope,
    Violation,
)
from service.agents.models import AgentRow
from service.deployments import service as deployments
from service.deployments.models import AgentDeploymentRow
from service.environments.models import EnvironmentRow
from service.errors import RefusalOnRecord
from service.events.service import record_event
from service.governance.checks import (
    CheckInput,
    CheckResult,
    CompiledCheck,
    compile_check,
    evaluate_message,
    prepared_input,
    run_check,
)
from service.governance.inputs import Resolutions, Subject, policy_input, resolve
from service.governance.models import PolicyExceptionRow, PolicyRow
from service.storage.db import utcnow


class PolicyViolation(RefusalOnRecord):
    """A deployment that breaks a deny policy, with no live exception for it. The denial is on
    record: an audit event `policyDenied` and a `policy.violation` event."""

    code = "policy_violation"
    audit_action = "policyDenied"

    def __init__(self, violations: Sequence[Violation], *, org_id: str, deployment: dict[str, Any]) -> None:
        named = "; ".join(f"{v.policy_name} ({v.agent}): {v.message}" for v in violations)
        super().__init__(f"Refused by policy: {named}")
        self.violations = list(violations)
        self.org_id, self.deployment = org_id, deployment

    def record_refusal(self, session: Session) -> Violation:
        announce(session, org_id=self.org_id, deployment=self.deployment, violations=self.violations)
        return self.violations[0]

    def details(self) -> list[dict[str, Any]]:
        return [
            {"policyId": v.policy_id, "policyName": v.policy_name, "agent": v.agent, "message": v.message}
            for v in self.violations
        ]


def environment_in_scope(scope: PolicyScope, environment: EnvironmentRow) -> bool:
    environments = scope.environments
    if environments.match == "names":
        return environment.name in environments.names
    return environment.protected if environments.match == "protected" else True


def agent_in_scope(scope: PolicyScope, tags: Iterable[str], fleet_id: str | None) -> bool:
    agents = scope.agents
    if agents.match == "tags":
        return not set(agents.tags).isdisjoint(tags)
    return fleet_id in agents.fleet_ids if agents.match == "fleets" else True


def in_scope(scope: PolicyScope, agent: AgentRow, environment: EnvironmentRow) -> bool:
    return environment_in_scope(scope, environment) and agent_in_scope(scope, agent.tags, agent.fleet_id)


def checked_policies(session: Session, *, org_id: str) -> list[PolicyRow]:
    """The organization's policies that carry a check, in a stable order."""
    query = select(PolicyRow).where(PolicyRow.org_id == org_id, PolicyRow.check.is_not(None))
    return list(session.scalars(query.order_by(PolicyRow.name)))


@dataclass(frozen=True)
class PreparedPolicy:
    """A policy read once per evaluation, not per agent: its fields, scope and compiled check."""

    id: str
    name: str
    version: int
    enforcement: str
    message: str | None
    scope: PolicyScope
    check: CompiledCheck


def prepared(policies: Sequence[PolicyRow]) -> list[PreparedPolicy]:
    return [
        PreparedPolicy(
            id=p.id,
            name=p.name,
            version=p.version,
            enforcement=p.enforcement,
            message=p.message,
            scope=PolicyScope.model_validate(p.scope),
            check=compile_check(p.check),
        )
        for p in policies
        if p.check is not None
    ]


def violations(
    policies: Sequence[PreparedPolicy],
    subjects: Sequence[Subject],
    environment: EnvironmentRow,
    deployment: dict[str, Any],
    resolved: Resolutions,
    exceptions: Sequence[PolicyExceptionRow] = (),
) -> list[Violation]:
    """Every policy each subject breaks in the environment, with the exception that covers it."""
    here = [policy for policy in policies if environment_in_scope(policy.scope, environment)]
    found = []
    for subject in subjects:
        tags, fleet_id = subject.agent.tags, subject.agent.fleet_id
        applicable = [policy for policy in here if agent_in_scope(policy.scope, tags, fleet_id)]
        if not applicable:
            continue
        inputs = prepared_input(policy_input(subject, environment, deployment, resolved))
        for policy in applicable:
            result = run_check(policy.check, inputs)
            if result.outcome != "pass":
                found.append(_violation(policy, subject, environment.name, result, inputs, exceptions))
    return found


def _violation(
    policy: PreparedPolicy,
    subject: Subject,
    environment_name: str,
    result: CheckResult,
    inputs: CheckInput,
    exceptions: Sequence[PolicyExceptionRow],
) -> Violation:
    message = (
        f"evaluation error: {result.error}"
        if result.outcome == "error"
        else evaluate_message(policy.message, inputs) or f"breaks policy '{policy.name}'"
    )
    agent = subject.agent.stable_key
    return Violation(
        policy_id=policy.id,
        policy_name=policy.name,
        policy_version=policy.version,
        enforcement=policy.enforcement,
        agent=agent,
        environment_name=environment_name,
        outcome=result.outcome,
        message=message,
        exception_id=_covering(exceptions, policy.id, agent, environment_name),
    )


def live_exceptions(
    session: Session, *, org_id: str, now: datetime | None = None
) -> list[PolicyExceptionRow]:
    moment = now or utcnow()
    query = select(PolicyExceptionRow).where(
        PolicyExceptionRow.org_id == org_id,
        PolicyExceptionRow.revoked_at.is_(None),
        PolicyExceptionRow.expires_at > moment,
    )
    return list(session.scalars(query))


@deployments.applied_policies.attach
def applied_policies(
    session: Session, *, org_id: str, environment: EnvironmentRow, agents: Sequence[AgentRow]
) -> dict[str, list[dict[str, Any]]]:
    """By agent id: the policies in whose scope it is in the environment, as the agent receives them."""
    policies = list(
        session.scalars(select(PolicyRow).where(PolicyRow.org_id == org_id).order_by(PolicyRow.id))
    )
    scoped = [(p, PolicyScope.model_validate(p.scope)) for p in policies]
    here = [
        (AppliedPolicy.model_validate(p).model_dump(mode="json", by_alias=True), scope)
        for p, scope in scoped
        if environment_in_scope(scope, environment)
    ]
    bundles = {}
    for agent in agents:
        tags, fleet_id = agent.tags, agent.fleet_id
        bundles[agent.id] = [shown for shown, scope in here if agent_in_scope(scope, tags, fleet_id)]
    return bundles


@deployments.policies_checked.attach
def check_deployment(
    session: Session,
    *,
    org_id: str,
    environment: EnvironmentRow,
    planned: Sequence[deployments.PlannedAgent],
    deployment: dict[str, Any],
    enforce: bool,
) -> list[Violation]:
    """The violations of a deployment about to run (or previewed); enforced, a deny violation with
    no live exception refuses it (403 policy_violation)."""
    policies = prepared(checked_policies(session, org_id=org_id))
    if not policies:
        return []
    subjects = [Subject(agent=plan.agent, config=plan.config) for plan in planned]
    resolved = resolve(session, org_id=org_id, environment_ids=[environment.id], subjects=subjects)
    exceptions = live_exceptions(session, org_id=org_id)
    found = violations(policies, subjects, environment, deployment, resolved, exceptions)
    refused = [v for v in found if v.enforcement == "deny" and v.exception_id is None]
    if enforce and refused:
        raise PolicyViolation(refused, org_id=org_id, deployment=deployment)
    shown = [v for v in found if v.enforcement != "audit"]
    if enforce and shown:
        announce(session, org_id=org_id, deployment=deployment, violations=shown)
    return found


def announce(
    session: Session, *, org_id: str, deployment: dict[str, Any], violations: Sequence[Violation]
) -> None:
    """The `policy.violation` event of a deployment's warn and deny outcomes (`refused` says which
    deployments did not go ahead)."""
    refused = any(v.enforcement == "deny" and v.exception_id is None for v in violations)
    payload = {
        "environmentName": violations[0].environment_name,
        "action": deployment["action"],
        "actor": deployment["actor"],
        "refused": refused,
        "violations": [v.model_dump(mode="json", by_alias=True) for v in violations],
    }
    record_event(session, org_id=org_id, type="policy.violation", payload=payload)


def running_subjects(
    session: Session, *, org_id: str
) -> dict[str, tuple[EnvironmentRow, list[tuple[Subject, datetime]]]]:
    """What runs now, per environment id: each agent with the config it was deployed with and when."""
    environments = {
        env.id: (env, [])
        for env in session.scalars(select(EnvironmentRow).where(EnvironmentRow.org_id == org_id))
    }
    rows = session.execute(
        select(AgentDeploymentRow, AgentRow)
        .join(AgentRow, AgentRow.id == AgentDeploymentRow.agent_id)
        .where(AgentDeploymentRow.org_id == org_id)
        .order_by(AgentRow.stable_key)
    )
    for deployed, agent in rows:
        environments[deployed.environment_id][1].append(
            (Subject(agent=agent, config=deployed.config), deployed.deployed_at)
        )
    return environments


def resolve_running(
    session: Session,
    *,
    org_id: str,
    running: dict[str, tuple[EnvironmentRow, list[tuple[Subject, datetime]]]],
) -> Resolutions:
    """The prompts and tool records of everything that runs, read at once for all environments."""
    subjects = [subject for _, pairs in running.values() for subject, _ in pairs]
    return resolve(session, org_id=org_id, environment_ids=running.keys(), subjects=subjects)


def impact(session: Session, *, org_id: str, policy: PolicyRow) -> list[ImpactEntry]:
    """What runs now that the policy flags, everywhere in its scope (exceptions aside)."""
    policies = prepared([policy])
    running = running_subjects(session, org_id=org_id)
    resolved = resolve_running(session, org_id=org_id, running=running)
    return [
        ImpactEntry(
            agent=violation.agent,
            environment_name=violation.environment_name,
            outcome=violation.outcome,
            message=violation.message,
        )
        for environment, pairs in running.values()
        for violation in violations(
            policies, [subject for subject, _ in pairs], environment, RUNNING, resolved
        )
    ]


def compliance(session: Session, *, org_id: str) -> Compliance:
    """Every policy with a check against what runs now in every environment it applies to,
    recomputed on read from the current deployment records: one evaluation per agent and
    environment, each check compiled once (and cached across reads)."""
    policies = prepared(checked_policies(session, org_id=org_id))
    exceptions = live_exceptions(session, org_id=org_id)
    everything = running_subjects(session, org_id=org_id)
    resolved = resolve_running(session, org_id=org_id, running=everything)
    matrix, listed = [], []
    for environment, running in everything.values():
        since = {subject.agent.stable_key: deployed_at for subject, deployed_at in running}
        found = violations(policies, [s for s, _ in running], environment, RUNNING, resolved, exceptions)
        open_ = [v for v in found if v.exception_id is None]
        for policy in policies:
            if not environment_in_scope(policy.scope, environment):
                continue
            covered = sum(agent_in_scope(policy.scope, s.agent.tags, s.agent.fleet_id) for s, _ in running)
            broken = sum(v.policy_id == policy.id for v in open_)
            matrix.append(
                ComplianceCell(
                    policy_id=policy.id,
                    policy_name=policy.name,
                    environment_name=environment.name,
                    violations=broken,
                    compliant=covered - broken,
                )
            )
        listed.extend(
            ComplianceViolation(
                agent=v.agent,
                environment_name=v.environment_name,
                policy_id=v.policy_id,
                policy_name=v.policy_name,
                enforcement=v.enforcement,
                message=v.message,
                since=since[v.agent],
            )
            for v in open_
        )
    return Compliance(matrix=matrix, violations=listed, evaluated_at=utcnow())


# A violation in what runs, as its `policy.violation` event names it: (policy id, agent, environment).
ViolationKey = tuple[str, str, str]


def noticed(found: Iterable[Violation]) -> dict[ViolationKey, Violation]:
    """The violations that call for notice: warn or deny, with no live exception."""
    return {
        (v.policy_id, v.agent, v.environment_name): v
        for v in found
        if v.enforcement != "audit" and v.exception_id is None
    }


def noticed_running(session: Session, *, org_id: str, policy: PolicyRow) -> dict[ViolationKey, Violation]:
    """What runs now that the policy flags and that calls for notice."""
    policies = prepared([policy])
    if not policies:
        return {}
    running = running_subjects(session, org_id=org_id)
    resolved = resolve_running(session, org_id=org_id, running=running)
    exceptions = live_exceptions(session, org_id=org_id)
    return noticed(
        violation
        for environment, pairs in running.values()
        for violation in violations(
            policies, [subject for subject, _ in pairs], environment, RUNNING, resolved, exceptions
        )
    )


def announce_new_in_running(
    session: Session,
    *,
    org_id: str,
    before: dict[ViolationKey, Violation],
    after: dict[ViolationKey, Violation],
    cause: str,
) -> None:
    """One `policy.violation` event per (policy, agent, environment) that calls for notice now and
    did not before the change (`cause`: `policySaved` or `deploymentCompleted`)."""
    for key, violation in after.items():
        if key in before:
            continue
        payload = {
            "environmentName": violation.environment_name,
            "action": RUNNING["action"],
            "actor": RUNNING["actor"],
            "refused": False,
            "cause": cause,
            "violations": [violation.model_dump(mode="json", by_alias=True)],
        }
        record_event(session, org_id=org_id, type="policy.violation", payload=payload)


@deployments.running_replaced.attach
def announce_new_after_deployment(
    session: Session,
    *,
    org_id: str,
    environment_id: str,
    replaced: dict[str, tuple[dict[str, Any] | None, dict[str, Any]]],
) -> None:
    """New violations in what a job replaced: each agent's config before it against the one now,
    every policy with a check (the prompts of both resolved as they stand now)."""
    policies = prepared(checked_policies(session, org_id=org_id))
    environment = session.get(EnvironmentRow, environment_id)
    if not policies or environment is None:
        return
    agents = {a.id: a for a in session.scalars(select(AgentRow).where(AgentRow.id.in_(replaced)))}
    earlier = [Subject(agents[i], old) for i, (old, _) in replaced.items() if old is not None and i in agents]
    now = [Subject(agents[i], new) for i, (_, new) in replaced.items() if i in agents]
    resolved = resolve(session, org_id=org_id, environment_ids=[environment_id], subjects=earlier + now)
    exceptions = live_exceptions(session, org_id=org_id)
    before = noticed(violations(policies, earlier, environment, RUNNING, resolved, exceptions))
    after = noticed(violations(policies, now, environment, RUNNING, resolved, exceptions))
    announce_new_in_running(session, org_id=org_id, before=before, after=after, cause="deploymentCompleted")


# What `deployment` says of what already runs: its deployer is not kept apart from the job.
RUNNING: dict[str, Any] = {"actor": "", "viaChangeRequest": False, "action": "running"}


def _covering(
    exceptions: Sequence[PolicyExceptionRow], policy_id: str, agent: str, environment: str
) -> str | None:
    for exception in exceptions:
        if exception.policy_id != policy_id:
            continue
        if exception.agent_stable_key not in (None, agent):
            continue
        if exception.environment_name not in (None, environment):
            continue
        return exception.id
    return None

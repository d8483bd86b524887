"""Applying an approved change exactly as previewed, or refusing it (`Moved`) when what it would
replace moved since.

Each applier is given the request and the reference what it makes keeps of it (`ChangeRequestRef`).
It first locks what the change replaces (`SELECT … FOR UPDATE` on PostgreSQL; SQLite's writers
already take turns), then checks it against the preview: of requests opened from one state and
approved at once, the first applies and the others find the state moved.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy.orm import Session

from api.approvals import ChangeRequestRef
from api.changes import PolicyExceptionChange
from api.deployments import DeploymentJob, DeploymentRequest
from api.governance import CreatePolicy, Policy, PolicyException, PolicyWithVersions, UpdatePolicy
from api.registries import MoveLabel
from service.changes.applied import Applied
from service.changes.environments import ENVIRONMENT_APPLIERS, environment_state, lock_target
from service.changes.models import ChangeRequestRow
from service.changes.plans import deployed_state
from service.deployments import service as deployments
from service.errors import ServiceError
from service.governance import exceptions
from service.governance import service as governance
from service.registries import service as registries


class Moved(ServiceError):
    """What a change would replace moved since it was previewed: the request ends `conflict`."""

    code = "conflict"


def apply_deployment(session: Session, row: ChangeRequestRow, reference: ChangeRequestRef) -> Applied:
    request = DeploymentRequest.model_validate(row.payload)
    environment = deployments.locked_environment(
        session, org_id=row.org_id, environment_id=request.environment_id
    )
    # Jobs under way first: one that ends after this read has recorded what it deployed before the
    # read of what runs there.
    under_way = deployments.job_under_way(
        session, org_id=row.org_id, environment_id=environment.id, stable_keys=request.agent_stable_keys
    )
    if under_way is not None:
        raise Moved(
            f"Job {under_way} is still deploying to environment '{environment.name}', so what runs "
            "there is changing from what the request previewed"
        )
    _, planned = deployments.plan_deployment(session, org_id=row.org_id, request=request)
    deployed = {plan.agent.stable_key: deployed_state(plan.current) for plan in planned}
    if deployed != row.preview["before"]:
        raise Moved(f"What runs in environment '{environment.name}' changed since the request was opened")
    requester = reference.requested_by
    job = deployments.create_job(
        session,
        org_id=row.org_id,
        request=request,
        actor=requester.email or requester.key_name,
        action="changeRequest",
        change_request=reference,
    )
    return Applied(
        result={"jobId": job.id, "environmentId": environment.id},
        action="deploy",
        body=request,
        answer=DeploymentJob.model_validate(job),
    )


def apply_label(session: Session, row: ChangeRequestRow, reference: ChangeRequestRef) -> Applied:
    request = MoveLabel.model_validate(row.payload)
    current, _ = registries.label_move(
        session,
        org_id=row.org_id,
        ref=request.registry_ref,
        name=request.name,
        label=request.label,
        version=request.version,
        lock=True,
    )
    before = row.preview["before"]
    if (current.version if current else None) != (before["version"] if before else None):
        raise Moved(f"Label '{request.label}' was moved since the request was opened")
    moved = registries.move_label(session, org_id=row.org_id, request=request, change_request=reference)
    return Applied(
        result={
            "registryRef": request.registry_ref,
            "name": request.name,
            "label": request.label,
            "version": request.version,
        },
        action="moveLabel",
        body=request,
        answer=moved,
    )


def apply_policy(session: Session, row: ChangeRequestRow, reference: ChangeRequestRef) -> Applied:
    action, payload = row.preview["action"], row.payload
    if action == "exception":
        granted = PolicyExceptionChange.model_validate(payload)
        requester = reference.requested_by
        exception = exceptions.create_exception(
            session,
            org_id=row.org_id,
            request=granted,
            created_by=requester.email or requester.key_name,
            change_request=reference,
        )
        return Applied(
            result={"exceptionId": exception.id, "policyId": exception.policy_id},
            action="createException",
            body=granted,
            answer=PolicyException.model_validate(exception),
        )
    if action == "create":
        created = CreatePolicy.model_validate(payload)
        policy = governance.create_policy(
            session, org_id=row.org_id, request=created, change_request=reference
        )
        return Applied(
            result={"policyId": policy.id, "version": policy.version},
            action="createPolicy",
            body=created,
            answer=PolicyWithVersions.model_validate(policy),
        )
    policy = governance.get_policy(session, org_id=row.org_id, policy_id=payload["policyId"], lock=True)
    if policy.version != row.preview["before"]["version"]:
        raise Moved(f"Policy '{policy.name}' changed since the request was opened")
    if action == "delete":
        governance.delete_policy(session, org_id=row.org_id, policy_id=policy.id, change_request=reference)
        return Applied(
            result={"policyId": policy.id, "deleted": True},
            action="deletePolicy",
            body=None,
            answer=Policy.model_validate(policy),
        )
    # The direct call's body: the policy's id is in its path, not a field.
    change = UpdatePolicy.model_validate({key: value for key, value in payload.items() if key != "policyId"})
    governance.update_policy(
        session, org_id=row.org_id, policy_id=policy.id, request=change, change_request=reference
    )
    return Applied(
        result={"policyId": policy.id, "version": policy.version},
        action="updatePolicy",
        body=change,
        answer=PolicyWithVersions.model_validate(policy),
    )


def apply_environment(session: Session, row: ChangeRequestRow, _reference: ChangeRequestRef) -> Applied:
    """Through each write's `reviewed=True` path: an environment change makes nothing that names
    its request but its audit event."""
    lock_target(session, org_id=row.org_id, payload=row.payload)
    if environment_state(session, org_id=row.org_id, payload=row.payload) != row.preview["before"]:
        raise Moved(f"The {row.target} changed since the request was opened")
    return ENVIRONMENT_APPLIERS[row.payload["action"]](session, row)


APPLIERS: dict[str, Callable[[Session, ChangeRequestRow, ChangeRequestRef], Applied]] = {
    "deployment": apply_deployment,
    "label": apply_label,
    "policy": apply_policy,
    "environment": apply_environment,
}

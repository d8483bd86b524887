"""Applying an approved change exactly as previewed, or refusing it (`Moved`) when what it would
replace moved since."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy.orm import Session

from api.changes import (
    PolicyUpdateChange,
)
from api.deployments import DeploymentRequest
from api.governance import CreatePolicy
from api.registries import MoveLabel
from service.changes.environments import ENVIRONMENT_APPLIERS, environment_state
from service.changes.models import ChangeRequestRow
from service.changes.plans import deployed_state
from service.deployments import service as deployments
from service.errors import ServiceError
from service.governance import service as governance
from service.registries import service as registries


class Moved(ServiceError):
    """What a change would replace moved since it was previewed: the request ends `conflict`."""

    code = "conflict"


def apply_deployment(session: Session, row: ChangeRequestRow) -> dict[str, Any]:
    request = DeploymentRequest.model_validate(row.payload)
    environment, planned = deployments.plan_deployment(session, org_id=row.org_id, request=request)
    deployed = {plan.agent.stable_key: deployed_state(plan.current) for plan in planned}
    if deployed != row.preview["before"]:
        raise Moved(f"What runs in environment '{environment.name}' changed since the request was opened")
    job = deployments.create_job(session, org_id=row.org_id, request=request, reviewed=True)
    return {"jobId": job.id, "environmentId": environment.id}


def apply_label(session: Session, row: ChangeRequestRow) -> dict[str, Any]:
    request = MoveLabel.model_validate(row.payload)
    current, _ = registries.label_move(
        session,
        org_id=row.org_id,
        ref=request.registry_ref,
        name=request.name,
        label=request.label,
        version=request.version,
    )
    before = row.preview["before"]
    if (current.version if current else None) != (before["version"] if before else None):
        raise Moved(f"Label '{request.label}' was moved since the request was opened")
    registries.move_label(session, org_id=row.org_id, request=request, reviewed=True)
    return {
        "registryRef": request.registry_ref,
        "name": request.name,
        "label": request.label,
        "version": request.version,
    }


def apply_policy(session: Session, row: ChangeRequestRow) -> dict[str, Any]:
    action, payload = row.preview["action"], row.payload
    if action == "create":
        policy = governance.create_policy(
            session, org_id=row.org_id, request=CreatePolicy.model_validate(payload), reviewed=True
        )
        return {"policyId": policy.id, "version": policy.version}
    policy = governance.get_policy(session, org_id=row.org_id, policy_id=payload["policyId"])
    if policy.version != row.preview["before"]["version"]:
        raise Moved(f"Policy '{policy.name}' changed since the request was opened")
    if action == "delete":
        governance.delete_policy(session, org_id=row.org_id, policy_id=policy.id, reviewed=True)
        return {"policyId": policy.id, "deleted": True}
    change = PolicyUpdateChange.model_validate(payload)
    governance.update_policy(session, org_id=row.org_id, policy_id=policy.id, request=change, reviewed=True)
    return {"policyId": policy.id, "version": policy.version}


def apply_environment(session: Session, row: ChangeRequestRow) -> dict[str, Any]:
    if environment_state(session, org_id=row.org_id, payload=row.payload) != row.preview["before"]:
        raise Moved(f"The {row.target} changed since the request was opened")
    return ENVIRONMENT_APPLIERS[row.payload["action"]](session, row)


APPLIERS: dict[str, Callable[[Session, ChangeRequestRow], dict[str, Any]]] = {
    "deployment": apply_deployment,
    "label": apply_label,
    "policy": apply_policy,
    "environment": apply_environment,
}

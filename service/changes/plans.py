"""What a change request would do, worked out when it is opened: the change pinned as it will be
applied, and its preview (field changes, a content diff or a policy's text diff)."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from sqlalchemy.orm import Session

from api.changes import (
    PolicyDeleteChange,
    PolicyUpdateChange,
)
from api.deployments import DeploymentRequest
from api.governance import CreatePolicy
from api.registries import MoveLabel
from service.deployments import service as deployments
from service.deployments.models import AgentDeploymentRow
from service.deployments.service import agent_previews
from service.errors import InvalidInput
from service.governance import service as governance
from service.governance.models import PolicyRow
from service.registries import service as registries

POLICY_FIELDS = ("name", "description", "category", "severity", "rule_text")


@dataclass(frozen=True)
class Planned:
    """A change as it will be applied (`payload`), what it changes (`preview`), and the environment
    whose protection governs it (its requiredApprovals; without one, a change needs one approval)."""

    payload: dict[str, Any]
    preview: dict[str, Any]
    target: str
    environment_id: str | None = None


def plan_deployment(session: Session, org_id: str, org_slug: str, payload: dict[str, Any]) -> Planned:
    request = _parsed(DeploymentRequest, payload, org_slug)
    environment, planned = deployments.plan_deployment(session, org_id=org_id, request=request)
    pinned = request.model_copy(
        update={"agent_versions": {plan.agent.stable_key: plan.version for plan in planned}}
    )
    preview = {
        "environmentId": environment.id,
        "environmentName": environment.name,
        "agents": [agent.model_dump(mode="json", by_alias=True) for agent in agent_previews(planned)],
        "before": {plan.agent.stable_key: deployed_state(plan.current) for plan in planned},
    }
    return Planned(
        payload=pinned.model_dump(mode="json", by_alias=True, exclude_none=True),
        preview=preview,
        target=f"environment {environment.name}",
        environment_id=environment.id,
    )


def plan_label(session: Session, org_id: str, org_slug: str, payload: dict[str, Any]) -> Planned:
    request = _parsed(MoveLabel, payload, org_slug)
    current, target = registries.label_move(
        session,
        org_id=org_id,
        ref=request.registry_ref,
        name=request.name,
        label=request.label,
        version=request.version,
    )
    before = registries.content_text(current) if current is not None else ""
    preview = {
        "registryRef": request.registry_ref,
        "name": request.name,
        "label": request.label,
        "before": {"version": current.version, "contentHash": current.content_hash} if current else None,
        "after": {"version": target.version, "contentHash": target.content_hash},
        "diff": _diff(
            before, registries.content_text(target), current.version if current else "(none)", target.version
        ),
    }
    return Planned(
        payload=request.model_dump(mode="json", by_alias=True),
        preview=preview,
        target=f"label {request.label} of {request.registry_ref}/{request.name}",
    )


def plan_policy(session: Session, org_id: str, org_slug: str, payload: dict[str, Any]) -> Planned:
    if "policyId" not in payload:
        created = _parsed(CreatePolicy, payload, org_slug)
        after = {field: getattr(created, field) for field in POLICY_FIELDS}
        return _policy_plan(created, None, None, after, f"policy {created.name} (new)")
    change: PolicyUpdateChange | PolicyDeleteChange = (
        _parsed(PolicyDeleteChange, payload, org_slug)
        if "delete" in payload
        else _parsed(PolicyUpdateChange, payload, org_slug)
    )
    policy = governance.get_policy(session, org_id=org_id, policy_id=change.policy_id)
    before = {field: getattr(policy, field) for field in POLICY_FIELDS}
    if isinstance(change, PolicyDeleteChange):
        return _policy_plan(change, policy, before, None, f"policy {policy.name} (delete)")
    after = before | {field: getattr(change, field) for field in change.model_fields_set & set(POLICY_FIELDS)}
    return _policy_plan(change, policy, before, after, f"policy {policy.name}")


def _policy_plan(
    change: BaseModel,
    policy: PolicyRow | None,
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
    target: str,
) -> Planned:
    preview = {
        "action": "create" if policy is None else "delete" if after is None else "update",
        "policyId": policy.id if policy else None,
        "before": {"version": policy.version, **_camel(before)} if policy and before else None,
        "after": _camel(after) if after else None,
        "diff": _diff(
            _policy_text(before), _policy_text(after), "current" if policy else "(none)", "proposed"
        ),
    }
    return Planned(
        payload=change.model_dump(mode="json", by_alias=True, exclude_unset=True),
        preview=preview,
        target=target,
    )


def _parsed(shape: type[Shape], payload: dict[str, Any], org_slug: str) -> Shape:
    """The payload as the direct call's body; its orgSlug, when it has one, is the request's."""
    values = dict(payload)
    if "org_slug" in shape.model_fields:
        values.setdefault("orgSlug", org_slug)
        if values["orgSlug"] != org_slug:
            raise InvalidInput(
                f"payload.orgSlug must be '{org_slug}', the request's organization", field="payload.orgSlug"
            )
    try:
        return shape.model_validate(values)
    except ValidationError as invalid:
        error = invalid.errors()[0]
        field = ".".join(["payload", *(str(part) for part in error["loc"])])
        raise InvalidInput(f"Invalid payload: {field}: {error['msg']}", field=field) from None


PLANNERS: dict[str, Callable[[Session, str, str, dict[str, Any]], Planned]] = {
    "deployment": plan_deployment,
    "label": plan_label,
    "policy": plan_policy,
}


def deployed_state(current: AgentDeploymentRow | None) -> dict[str, Any] | None:
    """What runs of an agent in an environment, as a deployment's preview pins it."""
    return None if current is None else {"version": current.version, "configHash": current.config_hash}


def _diff(before: str, after: str, before_name: str, after_name: str) -> str:
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), before_name, after_name
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def _policy_text(fields: dict[str, Any] | None) -> str:
    if not fields:
        return ""
    head = f"name: {fields['name']}\ncategory: {fields['category']}\nseverity: {fields['severity']}\n"
    return f"{head}description: {fields['description']}\n\n{fields['rule_text']}\n"


def _camel(fields: dict[str, Any] | None) -> dict[str, Any]:
    return {("ruleText" if key == "rule_text" else key): value for key, value in (fields or {}).items()}


Shape = TypeVar("Shape", bound=BaseModel)

"""What a change request would do, worked out when it is opened: the change pinned as it will be
applied, and its preview (field changes, a content diff or a policy's text diff)."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from pydantic import BaseModel, SecretStr, ValidationError
from pydantic.alias_generators import to_camel
from sqlalchemy.orm import Session

from api.changes import (
    ENVIRONMENT_CHANGES,
    EnvironmentDeleteChange,
    EnvironmentUpdateChange,
    PolicyDeleteChange,
    PolicyExceptionChange,
    PolicyUpdateChange,
    SecretChange,
    SecretDeleteChange,
    SigningKeyChange,
    ToolDeploymentChange,
)
from api.common import patched_fields
from api.deployments import DeploymentRequest, FieldChange
from api.governance import CreatePolicy
from api.registries import MoveLabel
from service.changes.environments import TOOL_RECORD_FIELDS, as_patch, environment_fields, environment_state
from service.deployments import service as deployments
from service.deployments.diffs import mapping_changes, value_changes
from service.deployments.models import AgentDeploymentRow
from service.deployments.service import agent_previews
from service.environments import service as environments
from service.environments.models import EnvironmentRow
from service.environments.protection import secret_carriers
from service.errors import InvalidInput
from service.governance import service as governance
from service.governance.models import PolicyRow
from service.outbound.webhooks import new_secret
from service.registries import service as registries
from service.tools import service as tools

# What a preview shows in place of a secret's value or a signing key: never the value itself.
NEW_VALUE = "[new value]"


@dataclass(frozen=True)
class Planned:
    """A change as it will be applied (`payload`), what it changes (`preview`), and the environment
    whose protection governs it (its requiredApprovals; without one, a change needs one approval).

    `secret` is a value the change carries that no answer shows (a secret's value), sealed in the
    request; one `shown_once` (a new signing key) is in the answer that opens it, and no other.
    """

    payload: dict[str, Any]
    preview: dict[str, Any]
    target: str
    environment_id: str | None = None
    secret: str | None = None
    shown_once: bool = False


def plan_deployment(
    session: Session, org_id: str, org_slug: str, payload: dict[str, Any], *, requester: str
) -> Planned:
    """A deployment's preview is checked against the policies as it will apply: by the requester
    (its job's actor), through a change request."""
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
        # Checked again when it is applied, where a deny violation refuses the approval.
        "violations": [
            violation.model_dump(mode="json", by_alias=True)
            for violation in deployments.policy_violations(
                session,
                org_id=org_id,
                environment=environment,
                planned=planned,
                deployment={"actor": requester, "viaChangeRequest": True, "action": "changeRequest"},
                enforce=False,
            )
        ],
        # The promotion gates as they stand when it is opened; checked again when it is applied.
        "promotionBlocks": deployments.promotion_blocks(session, environment, planned),
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
    if "exception" in payload:
        return _exception_plan(session, org_id, _parsed(PolicyExceptionChange, payload, org_slug))
    if "policyId" not in payload:
        created = _parsed(CreatePolicy, payload, org_slug)
        after = _policy_fields(created, governance.VERSIONED_FIELDS)
        return _policy_plan(created, None, None, after, f"policy {created.name} (new)")
    change: PolicyUpdateChange | PolicyDeleteChange = (
        _parsed(PolicyDeleteChange, payload, org_slug)
        if "delete" in payload
        else _parsed(PolicyUpdateChange, payload, org_slug)
    )
    policy = governance.get_policy(session, org_id=org_id, policy_id=change.policy_id)
    before = _policy_fields(policy, governance.VERSIONED_FIELDS)
    if isinstance(change, PolicyDeleteChange):
        return _policy_plan(change, policy, before, None, f"policy {policy.name} (delete)")
    after = before | _policy_fields(change, change.model_fields_set & set(governance.VERSIONED_FIELDS))
    return _policy_plan(change, policy, before, after, f"policy {policy.name}")


def _exception_plan(session: Session, org_id: str, change: PolicyExceptionChange) -> Planned:
    """An exception to a deny policy, where policies need approval: shown as it would be granted."""
    policy = governance.get_policy(session, org_id=org_id, policy_id=change.policy_id)
    granted = change.model_dump(mode="json", by_alias=True, exclude={"org_slug", "exception"})
    covered = " and ".join(
        f"{what} {name}"
        for what, name in (("agent", change.agent_stable_key), ("environment", change.environment_name))
        if name
    )
    preview = {"action": "exception", "policyId": policy.id, "before": None, "after": granted, "diff": ""}
    return Planned(
        payload=change.model_dump(mode="json", by_alias=True, exclude_unset=True),
        preview=preview,
        target=f"policy {policy.name} (exception for {covered})",
    )


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


def plan_environment(session: Session, org_id: str, org_slug: str, payload: dict[str, Any]) -> Planned:
    action = payload.get("action")
    if not isinstance(action, str) or action not in ENVIRONMENT_CHANGES:
        raise InvalidInput(
            f"payload.action must be one of {', '.join(ENVIRONMENT_CHANGES)}", field="payload.action"
        )
    # A secret's value, sealed when the request was parsed (api.changes), is checked as the direct
    # call checks it.
    unsealed = {key: v.get_secret_value() if isinstance(v, SecretStr) else v for key, v in payload.items()}
    change = _parsed(ENVIRONMENT_CHANGES[action], unsealed, org_slug)
    return _ENVIRONMENT_PLANNERS[action](session, org_id, change)


def _plan_update(session: Session, org_id: str, change: EnvironmentUpdateChange) -> Planned:
    environment = environments.get_environment(session, org_id=org_id, environment_id=change.environment_id)
    payload = _payload(change)
    changes = environments.checked_changes(
        session, environment=environment, changes=patched_fields(as_patch(payload))
    )
    fields = [
        field_change
        for field, value in changes.items()
        for field_change in value_changes(to_camel(field), getattr(environment, field), value)
    ]
    if not fields:
        raise InvalidInput(
            "The payload changes nothing: each field it sets has that value already", field="payload"
        )
    notes = []
    if environment.protected and changes.get("name", environment.name) != environment.name:
        notes.append(
            f"The name '{environment.name}' stays protected: applying this also creates a protected "
            "builtin environment under it, so that deployments by that name still need review."
        )
    return _environment_plan(environment, payload, fields, environment_fields(environment), notes=notes)


def _plan_delete(session: Session, org_id: str, change: EnvironmentDeleteChange) -> Planned:
    environment = environments.get_environment(session, org_id=org_id, environment_id=change.environment_id)
    environments.require_unused(session, environment)
    before = environment_fields(environment)
    fields = [
        field_change for field, value in before.items() for field_change in value_changes(field, value, None)
    ]
    notes = [
        f"Its secrets ({environment.secret_count}), signing key, tool deployment records and jobs are "
        f"deleted with it, and the name '{environment.name}' is free again."
    ]
    return _environment_plan(environment, _payload(change), fields, before, notes=notes, what="(delete)")


def _plan_signing_key(session: Session, org_id: str, change: SigningKeyChange) -> Planned:
    environment = environments.named_environment(session, org_id=org_id, environment_id=change.environment_id)
    payload = _payload(change)
    before = environment_state(session, org_id=org_id, payload=payload)
    field = FieldChange(
        field="signingKey",
        kind="changed" if before else "added",
        before=before["createdAt"] if before else None,
        after=NEW_VALUE,
    )
    planned = _environment_plan(environment, payload, [field], before, what="(signing key)")
    return replace(planned, secret=new_secret(), shown_once=True)


def _plan_tool_deployment(session: Session, org_id: str, change: ToolDeploymentChange) -> Planned:
    environment = tools.record_environment(session, org_id=org_id, name=change.environment)
    payload = _payload(change)
    before = environment_state(session, org_id=org_id, payload=payload)
    current = before["record"] or {}
    fields = [
        field_change
        for wire in TOOL_RECORD_FIELDS
        if wire != "toolProviderConfig"
        for field_change in value_changes(wire, current.get(wire), payload[wire])
    ]
    # Named like credentials, a config's values are redacted, as a deployment's preview redacts them.
    fields += mapping_changes(
        "toolProviderConfig", current.get("toolProviderConfig") or {}, payload.get("toolProviderConfig") or {}
    )
    return _environment_plan(environment, payload, fields, before, what=f"(tool {change.tool_key})")


def _plan_set_secret(session: Session, org_id: str, change: SecretChange) -> Planned:
    payload = _payload(change, exclude={"value"})
    before = environment_state(session, org_id=org_id, payload=payload)
    field = FieldChange(
        field=f"secrets.{change.name}",
        kind="changed" if before else "added",
        before=f"version {before['version']}" if before else None,
        after=NEW_VALUE,
    )
    planned = _secret_plan(session, org_id, change.name, change.environment_id, payload, field, before)
    return replace(planned, secret=change.value)


def _plan_delete_secret(session: Session, org_id: str, change: SecretDeleteChange) -> Planned:
    secret = environments.get_secret(session, org_id=org_id, secret_id=change.secret_id)
    field = FieldChange(field=f"secrets.{secret.name}", kind="removed", before=f"version {secret.version}")
    payload = _payload(change)
    before = environment_state(session, org_id=org_id, payload=payload)
    fallback = (
        environments.find_secret(session, org_id=org_id, name=secret.name, environment_id=None)
        if secret.environment_id is not None
        else None
    )
    notes = (
        [f"The environment then carries the organization-wide {secret.name} (version {fallback.version})."]
        if fallback is not None
        else []
    )
    return _secret_plan(
        session, org_id, secret.name, secret.environment_id, payload, field, before, notes=notes
    )


def _environment_plan(
    environment: EnvironmentRow,
    payload: dict[str, Any],
    fields: list[FieldChange],
    before: Any,
    *,
    notes: list[str] | None = None,
    what: str = "",
) -> Planned:
    """A change to one environment: its field changes, and the state it replaces (`before`, as
    service.changes.environments.environment_state reads it)."""
    preview = {
        "action": payload["action"],
        "environmentId": environment.id,
        "environmentName": environment.name,
        "changes": [field.model_dump(mode="json") for field in fields],
        "notes": notes or [],
        "before": before,
    }
    return Planned(
        payload=payload,
        preview=preview,
        target=f"environment {environment.name} {what}".rstrip(),
        environment_id=environment.id,
    )


def _secret_plan(
    session: Session,
    org_id: str,
    name: str,
    environment_id: str | None,
    payload: dict[str, Any],
    field: FieldChange,
    before: dict[str, Any] | None,
    *,
    notes: list[str] | None = None,
) -> Planned:
    """A change to a secret: its name and scope, the protected environments that carry it (whose
    strictest rule it needs), and the version it replaces (`before`); never its value."""
    scope = (
        environments.named_environment(session, org_id=org_id, environment_id=environment_id)
        if environment_id
        else None
    )
    carriers = secret_carriers(session, org_id=org_id, name=name, environment_id=environment_id)
    preview = {
        "action": payload["action"],
        "secret": {
            "name": name,
            "environmentId": environment_id,
            "scope": f"environment {scope.name}" if scope else "organization-wide",
        },
        "changes": [field.model_dump(mode="json")],
        "carriedBy": [environment.name for environment in carriers],
        "notes": notes or [],
        "before": before,
    }
    # The strictest of the protected environments that carry it decides (counted when it is decided).
    governing = max(carriers, key=lambda environment: environment.required_approvals, default=scope)
    return Planned(
        payload=payload,
        preview=preview,
        target=f"secret {name} of environment {scope.name}" if scope else f"organization-wide secret {name}",
        environment_id=governing.id if governing is not None else None,
    )


def _payload(change: BaseModel, *, exclude: set[str] | None = None) -> dict[str, Any]:
    """A change as its request stores it: the fields sent, in wire form."""
    return change.model_dump(mode="json", by_alias=True, exclude_unset=True, exclude=exclude)


_ENVIRONMENT_PLANNERS: dict[str, Callable[[Session, str, Any], Planned]] = {
    "update": _plan_update,
    "delete": _plan_delete,
    "setSecret": _plan_set_secret,
    "deleteSecret": _plan_delete_secret,
    "signingKey": _plan_signing_key,
    "toolDeployment": _plan_tool_deployment,
}


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


def plan(
    session: Session, *, org_id: str, org_slug: str, kind: str, payload: dict[str, Any], requester: str
) -> Planned:
    """The change a request of `kind` would make; `requester` is who a deployment's checks see deploying."""
    if kind == "deployment":
        return plan_deployment(session, org_id, org_slug, payload, requester=requester)
    return _PLANNERS[kind](session, org_id, org_slug, payload)


_PLANNERS: dict[str, Callable[[Session, str, str, dict[str, Any]], Planned]] = {
    "label": plan_label,
    "policy": plan_policy,
    "environment": plan_environment,
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
    enforced = (
        f"enforcement: {fields['enforcement'] or 'by severity'}\ncheck: {fields['check'] or '(none)'}\n"
    )
    return f"{head}{enforced}description: {fields['description']}\n\n{fields['rule_text']}\n"


def _camel(fields: dict[str, Any] | None) -> dict[str, Any]:
    return {to_camel(key): value for key, value in (fields or {}).items()}


def _policy_fields(source: object, fields: Iterable[str]) -> dict[str, Any]:
    """A policy's fields as a preview shows them, the scope and examples included, in JSON terms."""
    return {field: _plain(getattr(source, field)) for field in fields}


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True)
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


Shape = TypeVar("Shape", bound=BaseModel)

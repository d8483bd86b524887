"""Environment change requests: the state each action replaces, pinned in the preview when the
request is opened (`before`) and checked again before it is applied (service.changes.applying), and
each action applied as previewed, through the direct call's own logic with `reviewed=True`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy.orm import Session

from api.changes import CHANGE_ROLES
from api.common import format_timestamp
from api.environments import Environment, Secret, UpdateEnvironment
from api.tools import RecordToolDeployment
from service.changes.applied import Applied
from service.changes.models import ChangeRequestRow
from service.deployments import service as deployments
from service.environments import service as environments
from service.environments.models import DeploymentSigningKeyRow, EnvironmentRow
from service.orgs.models import OrganizationRow
from service.tools import service as tools

# A tool deployment record's fields, as a preview shows them and its pinned state holds them.
TOOL_RECORD_FIELDS = {
    "toolName": "tool_name",
    "provider": "provider",
    "toolId": "tool_id",
    "version": "version",
    "hash": "hash",
    "toolProviderConfig": "tool_provider_config",
}


def environment_state(session: Session, *, org_id: str, payload: dict[str, Any]) -> Any:
    """What an environment change (its stored payload) replaces, as it is now."""
    return _STATES[payload["action"]](session, org_id, payload)


def lock_target(session: Session, *, org_id: str, payload: dict[str, Any]) -> None:
    """Lock what an environment change replaces until the transaction ends (its environment, or for
    an organization-wide secret the organization), so that of changes approved at once each sees
    what the one before it left."""
    environment_id = payload.get("environmentId")
    if payload["action"] == "toolDeployment":
        named = environments.find_environment_by_name(session, org_id=org_id, name=payload["environment"])
        environment_id = named.id if named is not None else None
    elif payload["action"] == "deleteSecret":
        environment_id = environments.get_secret(
            session, org_id=org_id, secret_id=payload["secretId"]
        ).environment_id
    if environment_id is not None:
        session.get(EnvironmentRow, environment_id, with_for_update=True)
    else:
        session.get(OrganizationRow, org_id, with_for_update=True)


def environment_fields(environment: EnvironmentRow) -> dict[str, Any]:
    """An environment's own fields in wire names: what an update or a delete replaces."""
    return {
        "name": environment.name,
        "description": environment.description,
        "target": environment.target,
        "webhookUrl": environment.webhook_url,
        "verificationWebhookUrl": environment.verification_webhook_url,
    }


def as_patch(payload: dict[str, Any]) -> UpdateEnvironment:
    """An update's payload as the PATCH it stands for."""
    return UpdateEnvironment.model_validate(
        {key: value for key, value in payload.items() if key not in {"action", "environmentId"}}
    )


def _environment(session: Session, org_id: str, payload: dict[str, Any]) -> dict[str, Any]:
    environment = environments.get_environment(
        session, org_id=org_id, environment_id=payload["environmentId"]
    )
    return environment_fields(environment)


def _secret(session: Session, org_id: str, payload: dict[str, Any]) -> dict[str, Any] | None:
    if "secretId" in payload:
        secret = environments.get_secret(session, org_id=org_id, secret_id=payload["secretId"])
    else:
        secret = environments.find_secret(
            session, org_id=org_id, name=payload["name"], environment_id=payload.get("environmentId")
        )
    return None if secret is None else {"secretId": secret.id, "version": secret.version}


def _signing_key(session: Session, org_id: str, payload: dict[str, Any]) -> dict[str, Any] | None:
    key = session.get(DeploymentSigningKeyRow, payload["environmentId"])
    return None if key is None else {"createdAt": format_timestamp(key.created_at)}


def _tool_record(session: Session, org_id: str, payload: dict[str, Any]) -> dict[str, Any]:
    environment = environments.find_environment_by_name(session, org_id=org_id, name=payload["environment"])
    if environment is None:
        return {"environmentId": None, "record": None}
    record = tools.find_record(session, environment_id=environment.id, tool_key=payload["toolKey"])
    fields = (
        None
        if record is None
        else {wire: getattr(record, field) for wire, field in TOOL_RECORD_FIELDS.items()}
    )
    return {"environmentId": environment.id, "record": fields}


_STATES: dict[str, Callable[[Session, str, dict[str, Any]], Any]] = {
    "update": _environment,
    "delete": _environment,
    "setSecret": _secret,
    "deleteSecret": _secret,
    "signingKey": _signing_key,
    "toolDeployment": _tool_record,
}


# -- applying -------------------------------------------------------------------------------


def _apply_update(session: Session, row: ChangeRequestRow) -> Applied:
    patch = as_patch(row.payload)
    environment = environments.update_environment(
        session,
        org_id=row.org_id,
        environment_id=row.payload["environmentId"],
        request=patch,
        role=CHANGE_ROLES["environment"],
        reviewed=True,
    )
    result = {"environmentId": environment.id, "name": environment.name}
    old_name = row.preview["before"]["name"]
    if environment.name != old_name and environment.protected:
        result["nameHeldBy"] = environments.hold_name(session, renamed=environment, name=old_name).id
    return Applied(result, "updateEnvironment", patch, Environment.model_validate(environment))


def _apply_delete(session: Session, row: ChangeRequestRow) -> Applied:
    environment = environments.delete_environment(
        session, org_id=row.org_id, environment_id=row.payload["environmentId"], reviewed=True
    )
    result = {"environmentId": environment.id, "deleted": True}
    return Applied(result, "deleteEnvironment", None, Environment.model_validate(environment))


def _apply_set_secret(session: Session, row: ChangeRequestRow) -> Applied:
    assert row.sealed is not None, "a setSecret request is opened with its value sealed"
    secret = environments.store_secret(
        session,
        org_id=row.org_id,
        name=row.payload["name"],
        environment_id=row.payload.get("environmentId"),
        ciphertext=row.sealed,
        reviewed=True,
    )
    result = {"secretId": secret.id, "environmentId": secret.environment_id, "version": secret.version}
    # The body carried the value, which the trail never holds: the event names the secret alone.
    return Applied(result, "setSecret", None, Secret.model_validate(secret))


def _apply_delete_secret(session: Session, row: ChangeRequestRow) -> Applied:
    secret = environments.delete_secret(
        session, org_id=row.org_id, secret_id=row.payload["secretId"], reviewed=True
    )
    result = {"secretId": secret.id, "environmentId": secret.environment_id, "deleted": True}
    return Applied(result, "deleteSecret", None, Secret.model_validate(secret))


def _apply_signing_key(session: Session, row: ChangeRequestRow) -> Applied:
    assert row.sealed is not None, "a signingKey request is opened with its key sealed"
    key = deployments.install_signing_key(
        session,
        org_id=row.org_id,
        environment_id=row.payload["environmentId"],
        ciphertext=row.sealed,
        reviewed=True,
    )
    result = {"environmentId": key.environment_id, "signingKeyCreatedAt": format_timestamp(key.created_at)}
    # The direct call answers the key's value once; its event names the environment, as that one's does.
    environment = session.get_one(EnvironmentRow, key.environment_id)
    return Applied(result, "createSigningKey", None, Environment.model_validate(environment))


def _apply_tool_deployment(session: Session, row: ChangeRequestRow) -> Applied:
    request = RecordToolDeployment.model_validate(
        {key: value for key, value in row.payload.items() if key != "action"}
    )
    recorded = tools.record_tool_deployment(session, org_id=row.org_id, request=request, reviewed=True)
    record = recorded.record
    result = {
        "toolDeploymentId": record.id,
        "environmentId": record.environment_id,
        "version": record.version,
    }
    return Applied(result, "recordToolDeployment", request, tools.deployment_record(recorded))


ENVIRONMENT_APPLIERS: dict[str, Callable[[Session, ChangeRequestRow], Applied]] = {
    "update": _apply_update,
    "delete": _apply_delete,
    "setSecret": _apply_set_secret,
    "deleteSecret": _apply_delete_secret,
    "signingKey": _apply_signing_key,
    "toolDeployment": _apply_tool_deployment,
}

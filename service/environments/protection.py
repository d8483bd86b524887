"""What a protected environment guards: the rules that send a direct call to review. Each write to
an environment, its secrets, its signing key, its tool deployment records and each deployment to it
checks them before changing anything, unless it is applying an approved change request (given the
request it applies, or `reviewed=True`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from pydantic.alias_generators import to_camel
from sqlalchemy import select
from sqlalchemy.orm import Session

from service.environments.models import EnvironmentRow, SecretRow
from service.errors import ApprovalRequired


def require_review_of_deployment(
    environment: EnvironmentRow, *, payload: str = "this request's body", field: str = "environmentId"
) -> None:
    if environment.protected:
        raise ApprovalRequired(
            rule=f"Environment '{environment.name}' is protected (deployments need {_approvals(environment)})",
            kind="deployment",
            field=field,
            payload=payload,
        )


# What decides where a protected environment's deployments go and what they carry. Each changes
# only through an `environment` change request, whoever calls directly (admins too); its
# description stays free, and its protection rules are an admin's direct act
# (service.environments.service.PROTECTION_FIELDS). Every write to an environment consults this.
PROTECTED_ENVIRONMENT_FIELDS = ("name", "target", "webhook_url", "verification_webhook_url")


class Guarded(NamedTuple):
    """What of a protected environment an action of an `environment` change request changes, and
    how that request's payload is made from the direct call, both in words for the 403."""

    what: str
    payload: str


ENVIRONMENT_ACTIONS: Mapping[str, Guarded] = {
    "update": Guarded(
        "its name, target, webhook URL and verification webhook URL change",
        'the PATCH body with "action": "update" and "environmentId"',
    ),
    "delete": Guarded("deleting it goes", '{"action": "delete", "environmentId": …}'),
    "setSecret": Guarded("its secrets change", 'this request\'s body with "action": "setSecret"'),
    "deleteSecret": Guarded("its secrets change", '{"action": "deleteSecret", "secretId": …}'),
    "signingKey": Guarded(
        "its deployment signing key changes", 'this request\'s body with "action": "signingKey"'
    ),
    "toolDeployment": Guarded(
        "its tool deployment records change", 'this request\'s body with "action": "toolDeployment"'
    ),
}


def require_review_of_environment(environment: EnvironmentRow, action: str, *, field: str) -> None:
    if environment.protected:
        guarded = ENVIRONMENT_ACTIONS[action]
        raise ApprovalRequired(
            rule=f"Environment '{environment.name}' is protected: {guarded.what} only through review "
            f"({_approvals(environment)})",
            kind="environment",
            field=field,
            payload=guarded.payload,
        )


def require_review_of_environment_fields(environment: EnvironmentRow, changes: Mapping[str, Any]) -> None:
    """A PATCH's changes, judged against the environment as it is before them: a PATCH that also
    unprotects it does not retarget it."""
    moved = [
        field
        for field in PROTECTED_ENVIRONMENT_FIELDS
        if field in changes and changes[field] != getattr(environment, field)
    ]
    if moved:
        require_review_of_environment(environment, "update", field=to_camel(moved[0]))


def secret_carriers(
    session: Session, *, org_id: str, name: str, environment_id: str | None
) -> list[EnvironmentRow]:
    """The protected environments whose deployments carry the secret of this name and scope: its
    own environment, or for an organization-wide one each that has no secret of its own by that name."""
    query = select(EnvironmentRow).where(EnvironmentRow.org_id == org_id, EnvironmentRow.protected.is_(True))
    if environment_id is not None:
        query = query.where(EnvironmentRow.id == environment_id)
    else:
        own = select(SecretRow.id).where(
            SecretRow.environment_id == EnvironmentRow.id, SecretRow.name == name
        )
        query = query.where(~own.exists())
    return list(session.scalars(query.order_by(EnvironmentRow.name)))


def require_review_of_secret(
    session: Session, *, org_id: str, name: str, environment_id: str | None, action: str
) -> None:
    """A secret's set or delete, when a protected environment carries it."""
    carriers = secret_carriers(session, org_id=org_id, name=name, environment_id=environment_id)
    field = "secretId" if action == "deleteSecret" else "name" if environment_id is None else "environmentId"
    if environment_id is not None:
        for own in carriers:  # its environment, when protected
            require_review_of_environment(own, action, field=field)
    elif carriers:
        others = f" and {len(carriers) - 1} more" if len(carriers) > 1 else ""
        raise ApprovalRequired(
            rule=f"Organization-wide secret '{name}' is carried by protected environment "
            f"'{carriers[0].name}'{others}, which has no secret of its own by that name",
            kind="environment",
            field=field,
            payload=ENVIRONMENT_ACTIONS[action].payload,
        )


def _approvals(environment: EnvironmentRow) -> str:
    count = environment.required_approvals
    return "1 approval" if count == 1 else f"{count} approvals"

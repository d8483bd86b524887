from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import Path, Query
from sqlalchemy import Row
from sqlalchemy.orm import Session

from api.common import DEFAULT_PAGE_SIZE, Page
from api.environments import (
    CreateEnvironment,
    Environment,
    LastDeployment,
    ListEnvironments,
    Secret,
    SetSecret,
    UpdateEnvironment,
)
from service.environments import service
from service.environments.models import EnvironmentRow
from service.http.deps import (
    AppSettings,
    LimitQuery,
    OffsetQuery,
    Operator,
    OrgSlugQuery,
    ReadSession,
    Viewer,
    WriteSession,
)
from service.http.routing import api_router
from service.storage.crypto import cipher_for

router = api_router("/environments", tags=["Environments and secrets"])
SecretIdPath = Annotated[str, Path(alias="secretId", description="The secret's id.")]
EnvironmentIdPath = Annotated[str, Path(alias="environmentId", description="The environment's id.")]

# The fixed paths (/secrets, /list) are declared before /{environmentId} so that it never captures them.


@router.post("/secrets", response_model=Secret)
def set_secret(body: SetSecret, caller: Operator, session: WriteSession, settings: AppSettings) -> Secret:
    """Store a secret, encrypted; writing an existing name in the same scope rotates it (new version).

    The value is never returned, here or anywhere else.
    """
    secret = service.set_secret(
        session, cipher=cipher_for(settings), org_id=caller.org_id_for(body.org_slug), request=body
    )
    return Secret.model_validate(secret)


@router.get("/secrets", response_model=Page[Secret])
def list_secrets(
    org_slug: OrgSlugQuery,
    caller: Viewer,
    session: ReadSession,
    environment_id: str | None = Query(None, alias="environmentId", description="Only this environment's."),
    limit: LimitQuery = DEFAULT_PAGE_SIZE,
    offset: OffsetQuery = 0,
) -> Page[Secret]:
    """Names, scopes, versions and dates of the organization's secrets; never values."""
    secrets, total = service.list_secrets(
        session, org_id=caller.org_id_for(org_slug), environment_id=environment_id, limit=limit, offset=offset
    )
    return Page[Secret](
        items=[Secret.model_validate(s) for s in secrets], limit=limit, offset=offset, total=total
    )


@router.delete("/secrets/{secretId}", response_model=Secret)
def delete_secret(
    secret_id: SecretIdPath, org_slug: OrgSlugQuery, caller: Operator, session: WriteSession
) -> Secret:
    secret = service.delete_secret(session, org_id=caller.org_id_for(org_slug), secret_id=secret_id)
    return Secret.model_validate(secret)


@router.post("", response_model=Environment)
def create_environment(body: CreateEnvironment, caller: Operator, session: WriteSession) -> Environment:
    environment = service.create_environment(session, org_id=caller.org_id_for(body.org_slug), request=body)
    return Environment.model_validate(environment)


@router.post("/list", response_model=Page[Environment])
def list_environments(body: ListEnvironments, caller: Viewer, session: ReadSession) -> Page[Environment]:
    """The organization's environments by name, each with its secret count and newest job."""
    environments, total = service.list_environments(
        session,
        org_id=caller.org_id_for(body.org_slug),
        target=body.target,
        search=body.search,
        limit=body.limit,
        offset=body.offset,
    )
    ids = [e.id for e in environments]
    last = service.last_deployments(session, environment_ids=ids)
    keys = service.signing_key_dates(session, environment_ids=ids)
    return Page[Environment](
        items=[_environment(e, last.get(e.id), keys.get(e.id)) for e in environments],
        limit=body.limit,
        offset=body.offset,
        total=total,
    )


@router.get("/{environmentId}", response_model=Environment)
def get_environment(
    environment_id: EnvironmentIdPath, org_slug: OrgSlugQuery, caller: Viewer, session: ReadSession
) -> Environment:
    environment = service.get_environment(
        session, org_id=caller.org_id_for(org_slug), environment_id=environment_id
    )
    return _one(session, environment)


@router.patch("/{environmentId}", response_model=Environment)
def update_environment(
    environment_id: EnvironmentIdPath, body: UpdateEnvironment, caller: Operator, session: WriteSession
) -> Environment:
    """Change any of name, description, target and webhookUrl; an admin also protected and
    requiredApprovals (deployments to a protected environment go through change requests)."""
    environment = service.update_environment(
        session,
        org_id=caller.org_id_for(body.org_slug),
        environment_id=environment_id,
        request=body,
        role=caller.role,
    )
    return _one(session, environment)


@router.delete("/{environmentId}", response_model=Environment)
def delete_environment(
    environment_id: EnvironmentIdPath, org_slug: OrgSlugQuery, caller: Operator, session: WriteSession
) -> Environment:
    """Delete an environment with its secrets, tool deployment records and jobs; refused (400
    `in_use`) while agents are deployed there."""
    environment = service.delete_environment(
        session, org_id=caller.org_id_for(org_slug), environment_id=environment_id
    )
    return Environment.model_validate(environment)


def _one(session: Session, environment: EnvironmentRow) -> Environment:
    """One environment as answers show it, with its newest job and signing key date."""
    last = service.last_deployments(session, environment_ids=[environment.id])
    keys = service.signing_key_dates(session, environment_ids=[environment.id])
    return _environment(environment, last.get(environment.id), keys.get(environment.id))


def _environment(
    environment: EnvironmentRow, last: Row[Any] | None, signing_key_created_at: datetime | None
) -> Environment:
    """The wire record with its newest job and signing key date, which the caller fetched (for a
    whole page at once)."""
    record = Environment.model_validate(environment)
    record.last_deployment = LastDeployment.model_validate(last) if last is not None else None
    record.signing_key_created_at = signing_key_created_at
    return record

"""Environments (deployment targets) and their secrets, encrypted at rest.

A secret's value goes into the cipher on the way in and comes out only through
`decrypt_secret_values`, for outbound requests; nothing here returns, logs or quotes it otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import func, or_, select, update
from sqlalchemy.orm import Session

from api.common import patched_fields
from api.environments import CreateEnvironment, SetSecret, UpdateEnvironment
from api.members import role_at_least
from service.environments.models import DeploymentSigningKeyRow, EnvironmentRow, SecretRow
from service.environments.protection import (
    require_review_of_environment,
    require_review_of_environment_fields,
    require_review_of_secret,
)
from service.errors import AlreadyExists, InsufficientRole, InvalidInput, NotFound
from service.events.hooks import Hook
from service.storage.crypto import Cipher, reencrypt_column
from service.storage.db import insert_unless_taken, utcnow

# What the deployments area, above this one, adds: the newest job of each environment for its
# answers, and the refusal to delete one where agents run.
newest_jobs: Hook[dict[str, Any]] = Hook(
    "the newest job of each of these environments", attached_by="service.deployments.service"
)
leaving: Hook[None] = Hook(
    "an environment is about to be deleted (what still uses it refuses)",
    attached_by="service.deployments.service",
)


def create_environment(session: Session, *, org_id: str, request: CreateEnvironment) -> EnvironmentRow:
    _check_target(request.target, request.webhook_url)
    environment = EnvironmentRow(
        org_id=org_id,
        name=request.name,
        description=request.description,
        target=request.target,
        webhook_url=request.webhook_url,
    )
    if not insert_unless_taken(session, environment):
        raise _name_taken(request.name)
    return environment


def list_environments(
    session: Session, *, org_id: str, target: str | None, search: str | None, limit: int, offset: int
) -> tuple[list[EnvironmentRow], int]:
    """One page of the organization's environments by name, and how many match in all."""
    query = select(EnvironmentRow).where(EnvironmentRow.org_id == org_id)
    if target:
        query = query.where(EnvironmentRow.target == target)
    if search:
        term = search.lower()
        query = query.where(
            or_(
                func.lower(EnvironmentRow.name).contains(term, autoescape=True),
                func.lower(EnvironmentRow.description).contains(term, autoescape=True),
            )
        )
    total = session.scalar(select(func.count()).select_from(query.subquery())) or 0
    page = session.scalars(query.order_by(EnvironmentRow.name).limit(limit).offset(offset))
    return list(page), total


def get_environment(session: Session, *, org_id: str, environment_id: str) -> EnvironmentRow:
    environment = session.scalar(
        select(EnvironmentRow).where(EnvironmentRow.id == environment_id, EnvironmentRow.org_id == org_id)
    )
    if environment is None:
        raise NotFound(f"No environment '{environment_id}' in this organization", field="environmentId")
    return environment


def find_environment_by_name(session: Session, *, org_id: str, name: str) -> EnvironmentRow | None:
    return session.scalar(
        select(EnvironmentRow).where(EnvironmentRow.org_id == org_id, EnvironmentRow.name == name)
    )


# Protection rules and promotion gates of an environment: the route is the operator's, these
# fields the admin's.
PROTECTION_FIELDS = ("protected", "required_approvals")
PROMOTION_FIELDS = ("promotes_from", "require_promotion", "soak_minutes", "production")


def update_environment(
    session: Session,
    *,
    org_id: str,
    environment_id: str,
    request: UpdateEnvironment,
    role: str,
    reviewed: bool = False,
) -> EnvironmentRow:
    """Apply the given fields. Protection rules (`protected`, `requiredApprovals`) change only by an
    admin (`role`); a protected environment's name, target and webhook URL (judged as it was before
    this request) only by an approved change request (`reviewed`)."""
    changes = patched_fields(request)
    if any(field in changes for field in PROTECTION_FIELDS) and not role_at_least(role, "admin"):
        raise InsufficientRole(needed="admin", held=role, action="Changing protected or requiredApprovals")
    if any(field in changes for field in PROMOTION_FIELDS) and not role_at_least(role, "admin"):
        raise InsufficientRole(
            needed="admin",
            held=role,
            action="Changing promotesFrom, requirePromotion, soakMinutes or production",
        )
    # An approved change request (`reviewed`) carries a verification webhook its approvers saw.
    if "verification_webhook_url" in changes and not reviewed and not role_at_least(role, "admin"):
        raise InsufficientRole(needed="admin", held=role, action="Changing verificationWebhookUrl")
    environment = get_environment(session, org_id=org_id, environment_id=environment_id)
    if changes.get("promotes_from") is not None:
        check_promotion_path(session, environment=environment, promotes_from=changes["promotes_from"])
    changes = checked_changes(session, environment=environment, changes=changes)
    if not reviewed:
        require_review_of_environment_fields(environment, changes)
    for field, value in changes.items():
        setattr(environment, field, value)
    session.flush()
    return environment


def check_promotion_path(session: Session, *, environment: EnvironmentRow, promotes_from: str) -> None:
    """`promotes_from` names another environment of the organization, and following the path back
    from it never comes round to this one (400 naming the loop)."""
    source = session.scalar(
        select(EnvironmentRow).where(
            EnvironmentRow.id == promotes_from, EnvironmentRow.org_id == environment.org_id
        )
    )
    if source is None:
        raise InvalidInput(
            f"promotesFrom '{promotes_from}' names no environment of this organization", field="promotesFrom"
        )
    loop = [environment.name]
    while source is not None:
        loop.append(source.name)
        if source.id == environment.id:
            raise InvalidInput(
                f"promotesFrom would make a loop: {' promotes from '.join(loop)}", field="promotesFrom"
            )
        source = session.get(EnvironmentRow, source.promotes_from) if source.promotes_from else None


def checked_changes(
    session: Session, *, environment: EnvironmentRow, changes: dict[str, Any]
) -> dict[str, Any]:
    """A PATCH's fields as they would be applied, checked: switching to `builtin` drops the webhook
    URL, which it does not use; a new name must be free."""
    target = changes.get("target", environment.target)
    if target == "builtin" and "webhook_url" not in changes:
        changes = {**changes, "webhook_url": None}
    _check_target(target, changes.get("webhook_url", environment.webhook_url))
    new_name = changes.get("name", environment.name)
    if new_name != environment.name and find_environment_by_name(
        session, org_id=environment.org_id, name=new_name
    ):
        raise _name_taken(new_name)
    return changes


def hold_name(session: Session, *, renamed: EnvironmentRow, name: str) -> EnvironmentRow:
    """After a protected environment's reviewed rename: a protected `builtin` environment under its
    old name, in the same transaction, so that a pipeline still deploying by that name meets review
    (and, approved, a target that sends nothing anywhere) rather than an unprotected environment
    someone created in its place. Deleting it, through review, frees the name."""
    holder = EnvironmentRow(
        org_id=renamed.org_id,
        name=name,
        description=f"Renamed to '{renamed.name}'. Kept protected so that deployments by this name "
        "still need review; delete it through a change request once nothing deploys by it.",
        target="builtin",
        protected=True,
        required_approvals=renamed.required_approvals,
    )
    session.add(holder)
    session.flush()
    return holder


def last_deployments(session: Session, *, environment_ids: Sequence[str]) -> dict[str, Any]:
    """The newest job of each environment that has one, as the deployments area tells it."""
    if not environment_ids:
        return {}
    return {
        environment_id: job
        for answer in newest_jobs(session, environment_ids=environment_ids)
        for environment_id, job in answer.items()
    }


def signing_key_dates(session: Session, *, environment_ids: Sequence[str]) -> dict[str, datetime]:
    """When each environment that has a webhook signing key got it (by primary key: one seek each)."""
    if not environment_ids:
        return {}
    key = DeploymentSigningKeyRow
    query = select(key.environment_id, key.created_at).where(key.environment_id.in_(environment_ids))
    return {environment_id: created_at for environment_id, created_at in session.execute(query)}


def delete_environment(
    session: Session, *, org_id: str, environment_id: str, reviewed: bool = False
) -> EnvironmentRow:
    """Delete an environment where no agent is deployed; its secrets, tool deployment records and
    jobs go with it (foreign keys), and environments that promoted from it no longer promote. A protected one only by an approved change request (`reviewed`)."""
    environment = get_environment(session, org_id=org_id, environment_id=environment_id)
    if not reviewed:
        require_review_of_environment(environment, "delete", field="environmentId")
    require_unused(session, environment)
    session.execute(
        update(EnvironmentRow)
        .where(EnvironmentRow.org_id == org_id, EnvironmentRow.promotes_from == environment.id)
        .values(promotes_from=None)
    )
    session.delete(environment)
    session.flush()
    return environment


def require_unused(session: Session, environment: EnvironmentRow) -> None:
    """Refuse (400 `in_use`) deleting an environment that something still uses."""
    leaving(session, environment=environment)


def set_secret(session: Session, *, cipher: Cipher, org_id: str, request: SetSecret) -> SecretRow:
    """Store a secret, or give an existing one (same name and scope) a new value and version."""
    return store_secret(
        session,
        org_id=org_id,
        name=request.name,
        environment_id=request.environment_id,
        ciphertext=cipher.encrypt(request.value),
    )


def store_secret(
    session: Session,
    *,
    org_id: str,
    name: str,
    environment_id: str | None,
    ciphertext: str,
    reviewed: bool = False,
) -> SecretRow:
    """Store a value already encrypted (a change request carries it so) as the secret of this name
    and scope. One that a protected environment carries changes only by an approved change request
    (`reviewed`)."""
    if environment_id is not None:
        named_environment(session, org_id=org_id, environment_id=environment_id)
    if not reviewed:
        require_review_of_secret(
            session, org_id=org_id, name=name, environment_id=environment_id, action="setSecret"
        )
    existing = find_secret(session, org_id=org_id, name=name, environment_id=environment_id, lock=True)
    if existing is None:
        created = SecretRow(org_id=org_id, environment_id=environment_id, name=name, ciphertext=ciphertext)
        if insert_unless_taken(session, created):
            return created
        # A concurrent request stored the first version meanwhile: this one becomes the next.
        existing = find_secret(session, org_id=org_id, name=name, environment_id=environment_id, lock=True)
        assert existing is not None
    existing.ciphertext = ciphertext
    existing.version += 1
    existing.updated_at = utcnow()
    session.flush()
    return existing


def list_secrets(
    session: Session, *, org_id: str, environment_id: str | None, limit: int, offset: int
) -> tuple[list[SecretRow], int]:
    """Org-wide secrets first, then each environment's, by name; filtered to one environment if given."""
    query = select(SecretRow).where(SecretRow.org_id == org_id)
    if environment_id is not None:
        query = query.where(SecretRow.environment_id == environment_id)
    total = session.scalar(select(func.count()).select_from(query.subquery())) or 0
    ordered = query.order_by(SecretRow.environment_id.is_not(None), SecretRow.environment_id, SecretRow.name)
    return list(session.scalars(ordered.limit(limit).offset(offset))), total


def get_secret(session: Session, *, org_id: str, secret_id: str) -> SecretRow:
    secret = session.scalar(select(SecretRow).where(SecretRow.id == secret_id, SecretRow.org_id == org_id))
    if secret is None:
        raise NotFound(f"No secret '{secret_id}' in this organization", field="secretId")
    return secret


def delete_secret(session: Session, *, org_id: str, secret_id: str, reviewed: bool = False) -> SecretRow:
    """Delete a secret; one that a protected environment carries only by an approved change request
    (`reviewed`)."""
    secret = get_secret(session, org_id=org_id, secret_id=secret_id)
    if not reviewed:
        require_review_of_secret(
            session,
            org_id=org_id,
            name=secret.name,
            environment_id=secret.environment_id,
            action="deleteSecret",
        )
    session.delete(secret)
    session.flush()
    return secret


def decrypt_secret_values(
    session: Session, *, cipher: Cipher, org_id: str, environment_id: str | None, names: Iterable[str]
) -> dict[str, str]:
    """The plaintext of the named secrets as seen from an environment (its own win over org-wide).

    For building outbound requests only. Names with no secret in either scope are left out, so the
    caller can tell which are missing.
    """
    wanted = set(names)
    if not wanted:
        return {}
    scope = SecretRow.environment_id.is_(None)
    if environment_id is not None:
        scope = or_(scope, SecretRow.environment_id == environment_id)
    query = select(SecretRow).where(SecretRow.org_id == org_id, SecretRow.name.in_(wanted), scope)
    # Org-wide rows first, so that an environment's own value overwrites them below.
    rows = session.scalars(query.order_by(SecretRow.environment_id.is_not(None)))
    return {secret.name: cipher.decrypt(secret.ciphertext) for secret in rows}


def rotate_secrets(session: Session, *, cipher: Cipher) -> int:
    """Re-encrypt every stored secret of every organization under the first configured key."""
    return reencrypt_column(session, cipher=cipher, column=SecretRow.ciphertext)


def find_secret(
    session: Session, *, org_id: str, name: str, environment_id: str | None, lock: bool = False
) -> SecretRow | None:
    """The secret of this name and scope; `lock`ed until the transaction ends when it is to be
    rewritten, so that concurrent rotations get consecutive versions."""
    scope = (
        SecretRow.environment_id.is_(None)
        if environment_id is None
        else SecretRow.environment_id == environment_id
    )
    query = select(SecretRow).where(SecretRow.org_id == org_id, SecretRow.name == name, scope)
    return session.scalar(query.with_for_update() if lock else query)


def named_environment(session: Session, *, org_id: str, environment_id: str) -> EnvironmentRow:
    """The environment a body's `environmentId` names, which must exist (else 400 naming the field)."""
    environment = session.scalar(
        select(EnvironmentRow).where(EnvironmentRow.id == environment_id, EnvironmentRow.org_id == org_id)
    )
    if environment is None:
        raise InvalidInput(f"No environment '{environment_id}' in this organization", field="environmentId")
    return environment


def _check_target(target: str, webhook_url: str | None) -> None:
    if target == "webhook" and not webhook_url:
        raise InvalidInput("webhookUrl is required when the target is 'webhook'", field="webhookUrl")
    if target == "builtin" and webhook_url:
        raise InvalidInput(
            "webhookUrl is only used with target 'webhook'; leave it out for 'builtin'", field="webhookUrl"
        )


def _name_taken(name: str) -> AlreadyExists:
    return AlreadyExists(f"An environment named '{name}' already exists in this organization", field="name")

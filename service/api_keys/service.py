"""API keys: creation (value shown once), listing, revocation, and resolving a presented key."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from service.api_keys.keys import display_prefix, generate_key, hash_key, is_well_formed
from service.api_keys.models import ApiKey
from service.db import utcnow
from service.errors import InvalidInput, NotFound, Unauthorized

# lastUsedAt is written at most this often per key: a write per request would serialise reads.
LAST_USED_RESOLUTION = timedelta(minutes=1)


@dataclass(frozen=True)
class IssuedKey:
    record: ApiKey
    value: str


def create_key(session: Session, *, org_id: str, name: str) -> IssuedKey:
    value = generate_key()
    record = ApiKey(org_id=org_id, name=name, prefix=display_prefix(value), key_hash=hash_key(value))
    session.add(record)
    session.flush()
    return IssuedKey(record=record, value=value)


def list_keys(session: Session, *, org_id: str) -> list[ApiKey]:
    """The organization's active keys, newest first."""
    query = (
        select(ApiKey)
        .where(ApiKey.org_id == org_id, ApiKey.revoked_at.is_(None))
        .order_by(ApiKey.created_at.desc(), ApiKey.id.desc())
    )
    return list(session.scalars(query))


def revoke_key(session: Session, *, org_id: str, key_id: str, caller_key_id: str) -> ApiKey:
    """Revoke a key for good. A caller cannot revoke the key it is using (it would lock itself out)."""
    record = session.scalar(select(ApiKey).where(ApiKey.id == key_id, ApiKey.org_id == org_id))
    if record is None or record.revoked_at is not None:
        raise NotFound(f"No active API key '{key_id}' in this organization", field="keyId")
    if record.id == caller_key_id:
        raise InvalidInput(
            "A key cannot revoke itself; revoke it with another key of the organization",
            field="keyId",
            code="cannot_revoke_own_key",
        )
    record.revoked_at = utcnow()
    session.flush()
    return record


def resolve_key(session: Session, presented: str) -> ApiKey:
    """The active key matching a presented value, or Unauthorized saying why."""
    if not is_well_formed(presented):
        raise Unauthorized("The API key is malformed; keys look like odk_ followed by 38 letters and digits")
    record = session.scalar(select(ApiKey).where(ApiKey.key_hash == hash_key(presented)))
    if record is None:
        raise Unauthorized("The API key is not valid")
    if record.revoked_at is not None:
        raise Unauthorized("The API key has been revoked")
    return record


def needs_last_used_update(record: ApiKey) -> bool:
    return record.last_used_at is None or utcnow() - record.last_used_at >= LAST_USED_RESOLUTION


def touch_key(session: Session, *, key_id: str) -> None:
    session.execute(update(ApiKey).where(ApiKey.id == key_id).values(last_used_at=utcnow()))

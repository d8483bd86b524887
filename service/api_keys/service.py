"""API keys: creation (value shown once), listing, revocation, and resolving a presented key."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import bindparam, select, update
from sqlalchemy.orm import Session

from api.api_keys import ApiKey as ApiKeyRecord
from api.api_keys import CreateApiKey, KeyOwner
from api.members import lower_role, role_at_least
from service.api_keys.keys import display_prefix, generate_key, hash_key, is_well_formed
from service.api_keys.models import ApiKeyRow
from service.errors import InsufficientRole, InvalidInput, NotFound, Unauthorized
from service.http.auth import Authenticated, Caller
from service.members import service as members
from service.members.models import MemberRow
from service.orgs.models import OrganizationRow
from service.storage.db import utcnow

# lastUsedAt is written at most this often per key: a write per request would serialise reads.
LAST_USED_RESOLUTION = timedelta(minutes=1)


@dataclass(frozen=True)
class IssuedKey:
    record: ApiKeyRow
    value: str


def create_key(
    session: Session, *, org_id: str, name: str, role: str, member: MemberRow | None = None
) -> IssuedKey:
    value = generate_key()
    record = ApiKeyRow(
        org_id=org_id,
        name=name,
        prefix=display_prefix(value),
        key_hash=hash_key(value),
        role=role,
        member_id=member.id if member else None,
        member=member,
    )
    session.add(record)
    session.flush()
    return IssuedKey(record=record, value=value)


def issue_key(session: Session, *, caller: Caller, request: CreateApiKey) -> IssuedKey:
    """A key as `caller` may make it: of its own member, or as an admin of any member or none; never
    above the caller's role, nor above its member's."""
    org_id = caller.org_id_for(request.org_slug)
    if request.service and request.member_id:
        raise InvalidInput(
            "A service key belongs to no member: send memberId or service, not both", field="service"
        )
    member = _owner(session, caller=caller, org_id=org_id, request=request)
    if (member is None or member.id != caller.member_id) and caller.role != "admin":
        raise InsufficientRole(needed="admin", held=caller.role, action="Creating a key for someone else")
    role = request.role or (member.role if member else caller.role)
    if not role_at_least(caller.role, role):
        raise InsufficientRole(needed=role, held=caller.role, action=f"Creating a {role} key")
    if member is not None and not role_at_least(member.role, role):
        raise InvalidInput(
            f"A personal key cannot do more than its member: {member.email} is {member.role}", field="role"
        )
    return create_key(session, org_id=org_id, name=request.name, role=role, member=member)


def _owner(session: Session, *, caller: Caller, org_id: str, request: CreateApiKey) -> MemberRow | None:
    if request.member_id:
        return members.get_active_member(
            session, org_id=org_id, member_id=request.member_id, field="memberId"
        )
    if request.service or caller.member_id is None:
        return None
    return members.get_active_member(session, org_id=org_id, member_id=caller.member_id, field="memberId")


# Plain columns in one statement, built once: listing keys is the read every client starts with.
_ACTIVE_KEYS = (
    select(
        ApiKeyRow.id,
        ApiKeyRow.name,
        ApiKeyRow.prefix,
        ApiKeyRow.role,
        ApiKeyRow.created_at,
        ApiKeyRow.last_used_at,
        MemberRow.id.label("member_id"),
        MemberRow.email.label("member_email"),
        MemberRow.name.label("member_name"),
    )
    .outerjoin(MemberRow, MemberRow.id == ApiKeyRow.member_id)
    .where(ApiKeyRow.org_id == bindparam("org_id"), ApiKeyRow.revoked_at.is_(None))
    .order_by(ApiKeyRow.created_at.desc(), ApiKeyRow.id.desc())
)


def list_keys(session: Session, *, org_id: str) -> list[ApiKeyRecord]:
    """The organization's active keys, newest first."""
    return [
        ApiKeyRecord(
            id=row.id,
            name=row.name,
            prefix=row.prefix,
            role=row.role,
            member=KeyOwner(id=row.member_id, email=row.member_email, name=row.member_name)
            if row.member_id
            else None,
            created_at=row.created_at,
            last_used_at=row.last_used_at,
        )
        for row in session.connection().execute(_ACTIVE_KEYS, {"org_id": org_id})
    ]


def revoke_key(session: Session, *, caller: Caller, org_slug: str, key_id: str) -> ApiKeyRow:
    """Revoke a key for good: a key of one's own member, or as an admin any key. A caller cannot
    revoke the key it is using (it would lock itself out)."""
    org_id = caller.org_id_for(org_slug)
    record = session.scalar(select(ApiKeyRow).where(ApiKeyRow.id == key_id, ApiKeyRow.org_id == org_id))
    if record is None or record.revoked_at is not None:
        raise NotFound(f"No active API key '{key_id}' in this organization", field="keyId")
    own = caller.member_id is not None and record.member_id == caller.member_id
    if not own and caller.role != "admin":
        raise InsufficientRole(needed="admin", held=caller.role, action="Revoking someone else's key")
    if record.id == caller.key_id:
        raise InvalidInput(
            "A key cannot revoke itself; revoke it with another key of the organization",
            field="keyId",
            code="cannot_revoke_own_key",
        )
    record.revoked_at = utcnow()
    session.flush()
    return record


@dataclass(frozen=True)
class ResolvedKey:
    """A presented key that works: what a request needs of it, its organization and its member."""

    id: str
    name: str
    role: str
    last_used_at: datetime | None
    org_id: str
    org_slug: str
    org_name: str
    member_id: str | None
    member_email: str | None
    member_name: str | None
    member_role: str | None

    @property
    def effective_role(self) -> str:
        """The key's role, lowered to its member's current role."""
        return self.role if self.member_role is None else lower_role(self.role, self.member_role)


# Every request looks its key up: plain columns in one statement, built once.
_KEY_LOOKUP = (
    select(
        ApiKeyRow.id,
        ApiKeyRow.name,
        ApiKeyRow.role,
        ApiKeyRow.last_used_at,
        ApiKeyRow.revoked_at,
        OrganizationRow.id.label("org_id"),
        OrganizationRow.slug.label("org_slug"),
        OrganizationRow.name.label("org_name"),
        MemberRow.id.label("member_id"),
        MemberRow.email.label("member_email"),
        MemberRow.name.label("member_name"),
        MemberRow.role.label("member_role"),
        MemberRow.deactivated_at.label("member_deactivated_at"),
    )
    .join(OrganizationRow, OrganizationRow.id == ApiKeyRow.org_id)
    .outerjoin(MemberRow, MemberRow.id == ApiKeyRow.member_id)
    .where(ApiKeyRow.key_hash == bindparam("key_hash"))
)


def resolve_key(session: Session, presented: str) -> ResolvedKey:
    """The active key matching a presented value, or Unauthorized saying why."""
    if not is_well_formed(presented):
        raise Unauthorized("The API key is malformed; keys look like odk_ followed by 38 letters and digits")
    # On the session's connection: a plain statement needs none of the ORM's handling.
    row = session.connection().execute(_KEY_LOOKUP, {"key_hash": hash_key(presented)}).one_or_none()
    if row is None:
        raise Unauthorized("The API key is not valid")
    if row.revoked_at is not None:
        raise Unauthorized("The API key has been revoked")
    if row.member_deactivated_at is not None:
        raise Unauthorized("The member this key belongs to has been deactivated")
    return ResolvedKey(**{field: getattr(row, field) for field in ResolvedKey.__dataclass_fields__})


def authenticate(session: Session, credential: str) -> Authenticated:
    """An organization's API key as a request's credential (service.http.auth): the caller it
    stands for, acting with its role lowered to its member's current one; its last use recorded
    after the answer, at most once a minute (a write per request would serialise reads)."""
    try:
        record = resolve_key(session, credential)
    except Unauthorized as refusal:
        return Authenticated(refusal=refusal)
    caller = Caller(
        org_id=record.org_id,
        org_slug=record.org_slug,
        org_name=record.org_name,
        key_id=record.id,
        key_name=record.name,
        role=record.effective_role,
        key_role=record.role,
        member_id=record.member_id,
        member_email=record.member_email,
        member_name=record.member_name,
    )
    stale = record.last_used_at is None or utcnow() - record.last_used_at >= LAST_USED_RESOLUTION
    return Authenticated(
        caller=caller, afterwards=functools.partial(touch_key, key_id=record.id) if stale else None
    )


def touch_key(session: Session, *, key_id: str) -> ApiKeyRow:
    """Mark a key used now; the key."""
    record = session.get_one(ApiKeyRow, key_id)
    record.last_used_at = utcnow()
    session.flush()
    return record


@members.member_deactivated.attach
def revoke_member_keys(session: Session, *, member_id: str, at: datetime) -> None:
    """A deactivated member's keys stop working at once, and are listed as revoked."""
    session.execute(
        update(ApiKeyRow)
        .where(ApiKeyRow.member_id == member_id, ApiKeyRow.revoked_at.is_(None))
        .values(revoked_at=at)
    )

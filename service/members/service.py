"""Members: people of an organization with one fixed role each; deactivated, never deleted."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from api.members import CreateMember, UpdateMember
from service.errors import AlreadyExists, InvalidInput, NotFound
from service.events.hooks import Hook
from service.members.models import MemberRow
from service.storage.db import insert_unless_taken, utcnow

# A deactivated member's keys are revoked with it.
member_deactivated: Hook[None] = Hook("a member was deactivated", attached_by="service.api_keys.service")


def create_member(session: Session, *, org_id: str, request: CreateMember) -> MemberRow:
    email = request.email.lower()
    member = MemberRow(org_id=org_id, email=email, name=request.name, role=request.role)
    if not insert_unless_taken(session, member):
        raise AlreadyExists(f"A member with email '{email}' already exists", field="email")
    return member


def list_members(session: Session, *, org_id: str, include_inactive: bool) -> list[MemberRow]:
    query = select(MemberRow).where(MemberRow.org_id == org_id)
    if not include_inactive:
        query = query.where(MemberRow.deactivated_at.is_(None))
    return list(session.scalars(query.order_by(MemberRow.email)))


def get_member(session: Session, *, org_id: str, member_id: str, field: str = "memberId") -> MemberRow:
    member = session.scalar(select(MemberRow).where(MemberRow.id == member_id, MemberRow.org_id == org_id))
    if member is None:
        raise NotFound(f"No member '{member_id}' in this organization", field=field)
    return member


def get_active_member(session: Session, *, org_id: str, member_id: str, field: str = "memberId") -> MemberRow:
    member = get_member(session, org_id=org_id, member_id=member_id, field=field)
    if not member.active:
        raise InvalidInput(
            f"Member '{member.email}' has been deactivated", field=field, code="member_inactive"
        )
    return member


def update_member(session: Session, *, org_id: str, member_id: str, request: UpdateMember) -> MemberRow:
    """Rename or change the role; a lower role limits the member's keys from their next request."""
    member = get_active_member(session, org_id=org_id, member_id=member_id)
    if request.role is not None and request.role != "admin":
        _keep_an_admin(session, member, change="lose the admin role")
    for field in request.model_fields_set - {"org_slug"}:
        setattr(member, field, getattr(request, field))
    session.flush()
    return member


def deactivate_member(session: Session, *, org_id: str, member_id: str) -> MemberRow:
    """Deactivate a member and revoke every key of theirs, at once."""
    member = get_member(session, org_id=org_id, member_id=member_id)
    if not member.active:
        return member
    _keep_an_admin(session, member, change="be deactivated")
    now = utcnow()
    member.deactivated_at = now
    session.flush()
    member_deactivated(session, member_id=member.id, at=now)
    return member


def _keep_an_admin(session: Session, member: MemberRow, *, change: str) -> None:
    """An organization always keeps an active admin member: without one, nobody could manage it."""
    if member.role != "admin":
        return
    admins = session.scalars(
        select(MemberRow.id)
        .where(
            MemberRow.org_id == member.org_id, MemberRow.role == "admin", MemberRow.deactivated_at.is_(None)
        )
        # Locks the admins' rows (PostgreSQL), so two requests cannot each remove "another" admin.
        .with_for_update()
    ).all()
    if len(admins) <= 1:
        raise InvalidInput(
            f"{member.email} is the organization's last admin and cannot {change}; make another member admin first",
            field="role",
            code="last_admin",
        )

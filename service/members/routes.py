from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query

from api.common import Page
from api.members import CreateMember, Member, UpdateMember
from service.http.deps import Admin, OrgSlugQuery, ReadSession, Viewer, WriteSession
from service.http.routing import api_router
from service.members import service

router = api_router("/members", tags=["Members"])
MemberIdPath = Annotated[str, Path(alias="memberId", description="The member's id.")]


@router.post("", response_model=Member)
def create_member(body: CreateMember, caller: Admin, session: WriteSession) -> Member:
    """Add a person to the organization with a role; give them a key with POST /api-keys (memberId)."""
    member = service.create_member(session, org_id=caller.org_id_for(body.org_slug), request=body)
    return Member.model_validate(member)


@router.get("", response_model=Page[Member])
def list_members(
    org_slug: OrgSlugQuery,
    caller: Viewer,
    session: ReadSession,
    include_inactive: Annotated[bool, Query(alias="includeInactive")] = False,
) -> Page[Member]:
    """The organization's members by email; deactivated ones only with includeInactive."""
    members = service.list_members(
        session, org_id=caller.org_id_for(org_slug), include_inactive=include_inactive
    )
    return Page[Member](items=[Member.model_validate(m) for m in members], total=len(members))


@router.get("/{memberId}", response_model=Member)
def get_member(
    member_id: MemberIdPath, org_slug: OrgSlugQuery, caller: Viewer, session: ReadSession
) -> Member:
    """One member."""
    member = service.get_member(session, org_id=caller.org_id_for(org_slug), member_id=member_id)
    return Member.model_validate(member)


@router.patch("/{memberId}", response_model=Member)
def update_member(
    member_id: MemberIdPath, body: UpdateMember, caller: Admin, session: WriteSession
) -> Member:
    """Rename a member or change their role: their keys follow the new role from their next request."""
    member = service.update_member(
        session, org_id=caller.org_id_for(body.org_slug), member_id=member_id, request=body
    )
    return Member.model_validate(member)


@router.delete("/{memberId}", response_model=Member)
def deactivate_member(
    member_id: MemberIdPath, org_slug: OrgSlugQuery, caller: Admin, session: WriteSession
) -> Member:
    """Deactivate a member and revoke their keys at once. Their past actions stay in the audit trail."""
    member = service.deactivate_member(session, org_id=caller.org_id_for(org_slug), member_id=member_id)
    return Member.model_validate(member)

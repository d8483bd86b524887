from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query

from api.changes import (
    CHANGE_KINDS,
    CHANGE_STATUSES,
    CancelChangeRequest,
    ChangeRequest,
    CreatedChangeRequest,
    OpenChangeRequest,
    OrgSettings,
    OrgSettingsUpdate,
    ReviewChangeRequest,
)
from api.common import DEFAULT_PAGE_SIZE, Page
from service.changes import service
from service.deployments.service import parse_statuses
from service.http.deps import (
    Admin,
    AppSettings,
    Author,
    EnumListQuery,
    LimitQuery,
    OrgSlugQuery,
    ReadSession,
    Viewer,
    WriteSession,
)
from service.http.routing import api_router
from service.storage.crypto import cipher_for

router = api_router("", tags=["Reviewed changes"])

ChangeRequestId = Annotated[str, Path(alias="changeRequestId", description="The request's id (chg_…).")]
StatusQuery = Annotated[list[str], EnumListQuery(CHANGE_STATUSES, "Statuses")]
KindQuery = Annotated[
    list[str], EnumListQuery(CHANGE_KINDS, "Kinds (deployment, label, policy, environment)")
]


@router.post("/change-requests", response_model=CreatedChangeRequest)
def open_change_request(
    body: OpenChangeRequest, caller: Author, session: WriteSession, settings: AppSettings
) -> CreatedChangeRequest:
    """Open a request for a change, with its preview; nothing is applied until it is approved.

    Needs the role of the change itself: operator for a deployment or an environment change, author
    for a label or a policy. A secret's value in it is kept encrypted and never answered; a new
    signing key (an environment's signingKey action) is answered here only.
    """
    return service.open_change_request(
        session,
        caller=caller,
        cipher=cipher_for(settings),
        org_id=caller.org_id_for(body.org_slug),
        request=body,
    )


@router.get("/change-requests", response_model=Page[ChangeRequest])
def list_change_requests(
    org_slug: OrgSlugQuery,
    caller: Viewer,
    session: ReadSession,
    status: StatusQuery = [],  # noqa: B006 (FastAPI copies defaults)
    kind: KindQuery = [],  # noqa: B006
    limit: LimitQuery = DEFAULT_PAGE_SIZE,
    cursor: Annotated[str | None, Query(max_length=40, description="A page's nextCursor.")] = None,
    awaiting_my_review: Annotated[
        bool,
        Query(
            alias="awaitingMyReview",
            description="Only open requests the caller may approve: a change of their role, opened by "
            "another member, not yet reviewed by them (none for a service key).",
        ),
    ] = False,
) -> Page[ChangeRequest]:
    """Change requests, newest first."""
    items, next_cursor = service.list_change_requests(
        session,
        org_id=caller.org_id_for(org_slug),
        statuses=parse_statuses(status, allowed=CHANGE_STATUSES),
        kinds=parse_statuses(kind, allowed=CHANGE_KINDS, field="kind"),
        limit=limit,
        cursor=cursor,
        awaiting_review_by=caller if awaiting_my_review else None,
    )
    return Page[ChangeRequest](items=items, limit=limit, next_cursor=next_cursor)


@router.get("/change-requests/{changeRequestId}", response_model=ChangeRequest)
def get_change_request(
    change_request_id: ChangeRequestId, org_slug: OrgSlugQuery, caller: Viewer, session: ReadSession
) -> ChangeRequest:
    return service.get_change_request(
        session, org_id=caller.org_id_for(org_slug), change_request_id=change_request_id
    )


@router.post("/change-requests/{changeRequestId}/approve", response_model=ChangeRequest)
def approve_change_request(
    change_request_id: ChangeRequestId, body: ReviewChangeRequest, caller: Author, session: WriteSession
) -> ChangeRequest:
    """Approve as a member holding the change's role who did not request it; the last approval
    needed applies the change, as previewed, or ends the request `conflict` if its target moved."""
    return service.review(
        session,
        caller=caller,
        org_id=caller.org_id_for(body.org_slug),
        change_request_id=change_request_id,
        verdict="approve",
        comment=body.comment,
    )


@router.post("/change-requests/{changeRequestId}/reject", response_model=ChangeRequest)
def reject_change_request(
    change_request_id: ChangeRequestId, body: ReviewChangeRequest, caller: Author, session: WriteSession
) -> ChangeRequest:
    """Reject (same reviewers as approve): the request ends `rejected`."""
    return service.review(
        session,
        caller=caller,
        org_id=caller.org_id_for(body.org_slug),
        change_request_id=change_request_id,
        verdict="reject",
        comment=body.comment,
    )


@router.post("/change-requests/{changeRequestId}/cancel", response_model=ChangeRequest)
def cancel_change_request(
    change_request_id: ChangeRequestId, body: CancelChangeRequest, caller: Author, session: WriteSession
) -> ChangeRequest:
    """Withdraw an open request; its requester only."""
    return service.cancel(
        session, caller=caller, org_id=caller.org_id_for(body.org_slug), change_request_id=change_request_id
    )


@router.get("/settings", response_model=OrgSettings)
def get_settings(org_slug: OrgSlugQuery, caller: Viewer, session: ReadSession) -> OrgSettings:
    """The organization's settings of reviewed changes (defaults until set)."""
    return service.get_settings(session, org_id=caller.org_id_for(org_slug))


@router.put("/settings", response_model=OrgSettings)
def update_settings(body: OrgSettingsUpdate, caller: Admin, session: WriteSession) -> OrgSettings:
    """Require approval of policies; set how long open change requests wait before they expire."""
    return service.update_settings(session, org_id=caller.org_id_for(body.org_slug), request=body)

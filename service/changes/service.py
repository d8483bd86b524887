"""Change requests: a protected change opened with its preview, reviewed by other members, and
applied by its last approval in that approval's transaction, exactly as previewed, and on record as
its direct call would be (the requester its actor).

A request stays `open` in its row until a review, a cancel or the worker decides it; one whose age
passed the organization's TTL is `expired` from then on in every answer (read lazily: a read never
writes) and can no longer be reviewed. While it is open, its approvals are counted against the
rules and roles of the moment (service.changes.counting); deciding it keeps that count.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, false, or_, select
from sqlalchemy.orm import Session

from api.approvals import Approver, ChangeRequestRef, Requester
from api.changes import (
    CHANGE_ROLES,
    DEFAULT_TTL_DAYS,
    ChangeRequest,
    CreatedChangeRequest,
    OpenChangeRequest,
    OrgSettings,
    OrgSettingsUpdate,
    Review,
)
from api.members import role_at_least
from service.changes.applying import APPLIERS
from service.changes.counting import Standing, standings
from service.changes.models import ChangeRequestRow, ChangeReviewRow
from service.changes.plans import plan
from service.deployments import promotion_view
from service.errors import Forbidden, InsufficientRole, InvalidCursor, InvalidInput, NotFound, ServiceError
from service.events.service import record_event
from service.governance.evaluation import PolicyViolation
from service.http.auth import Caller
from service.http.requestid import current_request_id
from service.orgs.models import OrganizationRow
from service.redaction.objects import redacted
from service.settings import Settings
from service.storage.crypto import Cipher, reencrypt_column
from service.storage.db import Database, utcnow
from service.storage.ids import is_id
from service.trail.recording import record_applied

# -- settings -------------------------------------------------------------------------------


def get_settings(session: Session, *, org_id: str) -> OrgSettings:
    org = session.get_one(OrganizationRow, org_id)
    return OrgSettings(
        policy_approval_required=org.policy_approval_required,
        change_request_ttl_days=org.change_request_ttl_days,
        sign_in_domains=org.sign_in_domains,
        sign_in_default_role=org.sign_in_default_role,
        group_roles=org.group_roles,
    )


def update_settings(session: Session, *, org_id: str, request: OrgSettingsUpdate) -> OrgSettings:
    org = session.get_one(OrganizationRow, org_id, with_for_update=True)
    for field in request.model_fields_set - {"org_slug"}:
        if getattr(org, field) != getattr(request, field):
            setattr(org, field, getattr(request, field))
    session.flush()
    return get_settings(session, org_id=org_id)


def _ttl(session: Session, org_id: str) -> timedelta:
    days = session.scalar(select(OrganizationRow.change_request_ttl_days).where(OrganizationRow.id == org_id))
    return timedelta(days=days or DEFAULT_TTL_DAYS)


# -- opening --------------------------------------------------------------------------------


def open_change_request(
    session: Session, *, caller: Caller, cipher: Cipher, org_id: str, request: OpenChangeRequest
) -> CreatedChangeRequest:
    """Check the change as its direct call would, pin it and preview it; nothing is applied. A secret
    it carries is sealed in the request with `cipher`; a new signing key is answered here, once."""
    _require_role(caller, request.kind, "Opening")
    planned = plan(
        session,
        org_id=org_id,
        org_slug=request.org_slug,
        kind=request.kind,
        payload=request.payload,
        requester=caller.member_email or caller.key_name,
    )
    row = ChangeRequestRow(
        org_id=org_id,
        kind=request.kind,
        status="open",
        target=planned.target,
        reason=request.reason,
        payload=planned.payload,
        preview=planned.preview,
        environment_id=planned.environment_id,
        sealed=cipher.encrypt(planned.secret) if planned.secret is not None else None,
        requested_by_key_id=caller.key_id,
        requested_by_key_name=caller.key_name,
        requested_by_member_id=caller.member_id,
        requested_by_email=caller.member_email,
        reviews=[],
    )
    standing = standings(session, [row])[row.id]
    row.required_approvals = standing.required
    session.add(row)
    session.flush()
    record_event(session, org_id=org_id, type="change_request.opened", payload=_event_payload(row))
    return CreatedChangeRequest(
        **dict(_record(row, _ttl(session, org_id), standing)),
        signing_key=planned.secret if planned.shown_once else None,
    )


def rotate_sealed(session: Session, *, cipher: Cipher) -> int:
    """Re-encrypt the secrets that undecided change requests carry under the first configured key."""
    return reencrypt_column(session, cipher=cipher, column=ChangeRequestRow.sealed)


# -- reviewing ------------------------------------------------------------------------------


def review(
    session: Session, *, caller: Caller, org_id: str, change_request_id: str, verdict: str, comment: str
) -> ChangeRequest:
    """Approve or reject as a member holding the change's role who did not request it, once. The
    approval that brings the approvals counting now to the number the rules require now applies the
    change in this transaction (or ends the request `conflict`)."""
    row, ttl = _open_for_update(session, org_id=org_id, change_request_id=change_request_id)
    _require_role(caller, row.kind, "Reviewing")
    if caller.member_id is None or caller.member_email is None:
        raise Forbidden(
            "A service key belongs to no member, so it cannot review: approve or reject with a member's key",
            code="member_required",
        )
    if caller.member_id == row.requested_by_member_id:
        raise Forbidden("You requested this change: another member must review it", code="self_review")
    if any(review.member_id == caller.member_id for review in row.reviews):
        raise InvalidInput("You already reviewed this change request", code="already_reviewed")
    row.reviews.append(
        ChangeReviewRow(
            member_id=caller.member_id,
            member_email=caller.member_email,
            key_id=caller.key_id,
            verdict=verdict,
            comment=comment,
        )
    )
    session.flush()
    standing = standings(session, [row])[row.id]
    if verdict == "reject":
        _decide(session, row, "rejected", standing)
    elif standing.approved(row):
        _apply(session, row, standing)
    return _record(row, ttl, standing)


def cancel(session: Session, *, caller: Caller, org_id: str, change_request_id: str) -> ChangeRequest:
    """Withdraw an open request: only its requester (the member, or for a service key the key)."""
    row, ttl = _open_for_update(session, org_id=org_id, change_request_id=change_request_id)
    requester = (
        caller.member_id == row.requested_by_member_id
        if row.requested_by_member_id is not None
        else caller.key_id == row.requested_by_key_id
    )
    if not requester:
        raise Forbidden(
            "Only the requester can cancel a change request; reject it instead", code="not_requester"
        )
    standing = standings(session, [row])[row.id]
    _decide(session, row, "cancelled", standing)
    return _record(row, ttl, standing)


def expire_change_requests(db: Database, _settings: Settings) -> bool:
    """Worker task: mark `expired` (and announce) the open requests past their organization's TTL,
    so that an expiry is notified even if nobody reads the request."""
    # A read first: an idle worker must not take SQLite's write lock every round.
    with db.session() as session:
        if not _overdue(session, lock=False):
            return False
    with db.session(write=True) as session:
        rows = _overdue(session, lock=True)
        standing = standings(session, rows)
        for row in rows:
            _decide(session, row, "expired", standing[row.id])
    return False


def _overdue(session: Session, *, lock: bool) -> list[ChangeRequestRow]:
    query = (
        select(ChangeRequestRow, OrganizationRow.change_request_ttl_days)
        .join(OrganizationRow, OrganizationRow.id == ChangeRequestRow.org_id)
        .where(ChangeRequestRow.status == "open")
    )
    if lock:
        query = query.with_for_update(of=ChangeRequestRow, skip_locked=True)
    return [row for row, days in session.execute(query) if _status(row, timedelta(days=days)) == "expired"]


def _open_for_update(
    session: Session, *, org_id: str, change_request_id: str
) -> tuple[ChangeRequestRow, timedelta]:
    """The request, locked until this transaction ends (reviews of one request take turns), if open."""
    row = session.scalar(
        select(ChangeRequestRow)
        .where(ChangeRequestRow.id == change_request_id, ChangeRequestRow.org_id == org_id)
        .with_for_update()
    )
    if row is None:
        raise NotFound(
            f"No change request '{change_request_id}' in this organization", field="changeRequestId"
        )
    ttl = _ttl(session, org_id)
    status = _status(row, ttl)
    if status != "open":
        raise InvalidInput(
            f"Change request {row.id} is {status}; only an open request can be reviewed or cancelled",
            field="changeRequestId",
            code="not_open",
        )
    return row, ttl


def _apply(session: Session, row: ChangeRequestRow, standing: Standing) -> None:
    """Apply the change as previewed, or end `conflict` (applying nothing) if its target moved; a
    deployment a deny policy refuses refuses the approval (403 policy_violation). The
    change is on record as its direct call would be, its requester the actor, naming the request
    and its approvers; what it made names them too."""
    reference = _reference(row, standing)
    try:
        with session.begin_nested():
            applied = APPLIERS[row.kind](session, row, reference)
    except PolicyViolation:
        # Not a target that moved: the approval itself is refused, and the request stays open (a
        # policy exception, or a fixed agent, lets a later approval through).
        raise
    except ServiceError as moved:
        row.conflict = moved.message
        _decide(session, row, "conflict", standing)
        return
    row.result = applied.result
    _decide(session, row, "applied", standing)
    record_applied(
        session,
        org_id=row.org_id,
        change_request=reference,
        action=applied.action,
        result=applied.answer,
        body=applied.body,
        request_id=current_request_id.get(),
    )


def _reference(row: ChangeRequestRow, standing: Standing) -> ChangeRequestRef:
    """How what an applied request made names it: its requester and the approvals that applied it.
    Those never change afterwards, so what it made keeps them, and no answer of it reads requests."""
    approvers = [
        Approver(member_id=review.member_id, email=review.member_email) for review in standing.counted(row)
    ]
    return ChangeRequestRef(id=row.id, requested_by=_requester(row), approved_by=approvers)


def _decide(session: Session, row: ChangeRequestRow, status: str, standing: Standing) -> None:
    """End the request, keeping how its approvals stood: its answers show them as they decided it."""
    row.status = status
    row.decided_at = utcnow()
    row.required_approvals = standing.required
    for review in row.reviews:
        review.not_counted_because = standing.not_counted.get(review.id)
    row.sealed = None  # applied, it lives where it was installed; otherwise nowhere
    session.flush()
    record_event(session, org_id=row.org_id, type="change_request.decided", payload=_event_payload(row))


# -- reading --------------------------------------------------------------------------------


def get_change_request(session: Session, *, org_id: str, change_request_id: str) -> ChangeRequest:
    row = session.scalar(
        select(ChangeRequestRow).where(
            ChangeRequestRow.id == change_request_id, ChangeRequestRow.org_id == org_id
        )
    )
    if row is None:
        raise NotFound(
            f"No change request '{change_request_id}' in this organization", field="changeRequestId"
        )
    return _records(session, [row], _ttl(session, org_id))[0]


def list_change_requests(
    session: Session,
    *,
    org_id: str,
    statuses: Sequence[str],
    kinds: Sequence[str],
    limit: int,
    cursor: str | None,
    awaiting_review_by: Caller | None = None,
) -> tuple[list[ChangeRequest], str | None]:
    """Change requests newest first, of the given statuses (as answers show them) and kinds; with
    `awaiting_review_by`, only the open ones that caller may approve now."""
    if cursor is not None and not is_id(cursor, "chg"):
        raise InvalidCursor
    ttl = _ttl(session, org_id)
    query = select(ChangeRequestRow).where(ChangeRequestRow.org_id == org_id)
    if statuses:
        query = query.where(_shown_as(statuses, utcnow() - ttl))
    if kinds:
        query = query.where(ChangeRequestRow.kind.in_(kinds))
    if awaiting_review_by is not None:
        query = query.where(_awaiting_review_by(awaiting_review_by, utcnow() - ttl))
    if cursor is not None:
        query = query.where(ChangeRequestRow.id < cursor)
    rows = list(session.scalars(query.order_by(ChangeRequestRow.id.desc()).limit(limit + 1)))
    next_cursor = rows[limit - 1].id if len(rows) > limit else None
    return _records(session, rows[:limit], ttl), next_cursor


@promotion_view.pending_deployments.attach
def pending_deployments(
    session: Session, *, org_id: str, environment_ids: Sequence[str]
) -> list[promotion_view.PendingDeployment]:
    """The open deployment requests (as answers show them: not past the TTL) to these
    environments, oldest first: what waits for review there."""
    if not environment_ids:
        return []
    query = select(ChangeRequestRow).where(
        ChangeRequestRow.org_id == org_id,
        ChangeRequestRow.kind == "deployment",
        ChangeRequestRow.environment_id.in_(environment_ids),
        _shown_as(["open"], utcnow() - _ttl(session, org_id)),
    )
    return [
        promotion_view.PendingDeployment(
            id=row.id,
            environment_id=row.environment_id or "",
            stable_keys=tuple(row.payload.get("agentStableKeys", ())),
        )
        for row in session.scalars(query.order_by(ChangeRequestRow.id))
    ]


def _awaiting_review_by(caller: Caller, cutoff: datetime) -> Any:
    """Open requests the caller may approve: a change whose role they hold, not requested by their
    member (whichever of its keys opened it), not yet reviewed by them. A service key reviews nothing."""
    if caller.member_id is None:
        return false()
    reviewable = [kind for kind, role in CHANGE_ROLES.items() if role_at_least(caller.role, role)]
    reviewed = select(ChangeReviewRow.change_request_id).where(ChangeReviewRow.member_id == caller.member_id)
    return and_(
        _shown_as(["open"], cutoff),
        ChangeRequestRow.kind.in_(reviewable),
        or_(
            ChangeRequestRow.requested_by_member_id.is_(None),
            ChangeRequestRow.requested_by_member_id != caller.member_id,
        ),
        ChangeRequestRow.id.not_in(reviewed),
    )


def _shown_as(statuses: Sequence[str], cutoff: datetime) -> Any:
    """Rows whose status, as answers show it (an open one past its TTL is expired), is one of these."""
    stored = [status for status in statuses if status not in {"open", "expired"}]
    conditions = [ChangeRequestRow.status.in_(stored)] if stored else []
    if "open" in statuses:
        conditions.append(and_(ChangeRequestRow.status == "open", ChangeRequestRow.created_at > cutoff))
    if "expired" in statuses:
        conditions.append(ChangeRequestRow.status == "expired")
        conditions.append(and_(ChangeRequestRow.status == "open", ChangeRequestRow.created_at <= cutoff))
    return or_(*conditions)


def _status(row: ChangeRequestRow, ttl: timedelta) -> str:
    return "expired" if row.status == "open" and row.created_at + ttl <= utcnow() else row.status


def _records(session: Session, rows: Sequence[ChangeRequestRow], ttl: timedelta) -> list[ChangeRequest]:
    """The answers: an open request as it stands now, a decided one as it stood when decided."""
    now = standings(session, [row for row in rows if row.status == "open"])
    return [_record(row, ttl, now.get(row.id) or _standing_when_decided(row)) for row in rows]


def _standing_when_decided(row: ChangeRequestRow) -> Standing:
    return Standing(
        required=row.required_approvals,
        not_counted={
            review.id: reason for review in row.reviews if (reason := review.not_counted_because) is not None
        },
    )


def _record(row: ChangeRequestRow, ttl: timedelta, standing: Standing) -> ChangeRequest:
    """The request as readers see it: the stored payload keeps its credentials, to be applied as
    sent; what is shown of it has them redacted. A preview is the service's own record, its changes
    redacted when planned; only the state it pinned (`before`, e.g. a tool record's config) is
    free-form."""
    reviews = [_review(review, standing.not_counted.get(review.id)) for review in row.reviews]
    return ChangeRequest(
        id=row.id,
        kind=row.kind,
        status=_status(row, ttl),
        target=row.target,
        reason=row.reason,
        payload=redacted(row.payload),
        preview=row.preview | {"before": redacted(row.preview.get("before"))},
        requested_by=_requester(row),
        required_approvals=standing.required,
        approvals=[review for review in reviews if review.verdict == "approve"],
        rejection=next((review for review in reviews if review.verdict == "reject"), None),
        result=row.result,
        conflict=row.conflict,
        created_at=row.created_at,
        expires_at=row.created_at + ttl,
        decided_at=row.decided_at,
    )


def _review(row: ChangeReviewRow, not_counted_because: str | None) -> Review:
    return Review(
        member_id=row.member_id,
        email=row.member_email,
        key_id=row.key_id,
        verdict=row.verdict,
        comment=row.comment,
        created_at=row.created_at,
        counted=not_counted_because is None,
        not_counted_because=not_counted_because,
    )


def _requester(row: ChangeRequestRow) -> Requester:
    return Requester(
        key_id=row.requested_by_key_id,
        key_name=row.requested_by_key_name,
        member_id=row.requested_by_member_id,
        email=row.requested_by_email,
    )


# -- helpers --------------------------------------------------------------------------------


def _require_role(caller: Caller, kind: str, doing: str) -> None:
    needed = CHANGE_ROLES[kind]
    if not role_at_least(caller.role, needed):
        raise InsufficientRole(needed=needed, held=caller.role, action=f"{doing} a {kind} change request")


def _event_payload(row: ChangeRequestRow) -> dict[str, Any]:
    return {
        "changeRequestId": row.id,
        "kind": row.kind,
        "status": row.status,
        "target": row.target,
        "reason": row.reason,
        "requestedBy": row.requested_by_email or row.requested_by_key_name,
        "reviewedBy": [review.member_email for review in row.reviews],
        "result": row.result,
        "conflict": row.conflict,
    }

"""Change requests: a protected change opened with its preview, reviewed by other members, and
applied by its last approval in that approval's transaction, exactly as previewed.

A request stays `open` in its row until a review, a cancel or the worker decides it; one whose age
passed the organization's TTL is `expired` from then on in every answer (read lazily: a read never
writes) and can no longer be reviewed.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from sqlalchemy import and_, or_, select
from sqlalchemy.orm import Session

from api.changes import (
    CHANGE_ROLES,
    DEFAULT_TTL_DAYS,
    ChangeRequest,
    OpenChangeRequest,
    OrgSettings,
    OrgSettingsUpdate,
    PolicyDeleteChange,
    PolicyUpdateChange,
    Requester,
    Review,
)
from api.deployments import DeploymentRequest
from api.governance import CreatePolicy
from api.members import role_at_least
from api.registries import MoveLabel
from service.auth import Caller
from service.changes.models import ChangeRequestRow, ChangeReviewRow
from service.db import Database, utcnow
from service.deployments import service as deployments
from service.deployments.models import AgentDeploymentRow
from service.deployments.service import agent_previews
from service.errors import Forbidden, InsufficientRole, InvalidCursor, InvalidInput, NotFound, ServiceError
from service.events.service import record_event
from service.governance import service as governance
from service.governance.models import PolicyRow
from service.ids import is_id
from service.orgs.models import OrganizationRow
from service.registries import service as registries
from service.settings import Settings

POLICY_FIELDS = ("name", "description", "category", "severity", "rule_text")


class Moved(ServiceError):
    """What a change would replace moved since it was previewed: the request ends `conflict`."""

    code = "conflict"


@dataclass(frozen=True)
class Planned:
    """A change as it will be applied (`payload`), what it changes (`preview`), and its rule."""

    payload: dict[str, Any]
    preview: dict[str, Any]
    target: str
    required_approvals: int = 1


# -- settings -------------------------------------------------------------------------------


def get_settings(session: Session, *, org_id: str) -> OrgSettings:
    org = session.get_one(OrganizationRow, org_id)
    return OrgSettings(
        policy_approval_required=org.policy_approval_required,
        change_request_ttl_days=org.change_request_ttl_days,
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
    session: Session, *, caller: Caller, org_id: str, request: OpenChangeRequest
) -> ChangeRequest:
    """Check the change as its direct call would, pin it and preview it; nothing is applied."""
    _require_role(caller, request.kind, "Opening")
    planned = _PLANNERS[request.kind](session, org_id, request.org_slug, request.payload)
    row = ChangeRequestRow(
        org_id=org_id,
        kind=request.kind,
        status="open",
        target=planned.target,
        reason=request.reason,
        payload=planned.payload,
        preview=planned.preview,
        required_approvals=planned.required_approvals,
        requested_by_key_id=caller.key_id,
        requested_by_key_name=caller.key_name,
        requested_by_member_id=caller.member_id,
        requested_by_email=caller.member_email,
        reviews=[],
    )
    session.add(row)
    session.flush()
    record_event(session, org_id=org_id, type="change_request.opened", payload=_event_payload(row))
    return _record(row, _ttl(session, org_id))


def _plan_deployment(session: Session, org_id: str, org_slug: str, payload: dict[str, Any]) -> Planned:
    request = _parsed(DeploymentRequest, payload, org_slug)
    environment, planned = deployments.plan_deployment(session, org_id=org_id, request=request)
    pinned = request.model_copy(
        update={"agent_versions": {plan.agent.stable_key: plan.version for plan in planned}}
    )
    preview = {
        "environmentId": environment.id,
        "environmentName": environment.name,
        "agents": [agent.model_dump(mode="json", by_alias=True) for agent in agent_previews(planned)],
        "before": {plan.agent.stable_key: _deployed(plan.current) for plan in planned},
    }
    return Planned(
        payload=pinned.model_dump(mode="json", by_alias=True, exclude_none=True),
        preview=preview,
        target=f"environment {environment.name}",
        required_approvals=environment.required_approvals,
    )


def _plan_label(session: Session, org_id: str, org_slug: str, payload: dict[str, Any]) -> Planned:
    request = _parsed(MoveLabel, payload, org_slug)
    current, target = registries.label_move(
        session,
        org_id=org_id,
        ref=request.registry_ref,
        name=request.name,
        label=request.label,
        version=request.version,
    )
    before = registries.content_text(current) if current is not None else ""
    preview = {
        "registryRef": request.registry_ref,
        "name": request.name,
        "label": request.label,
        "before": {"version": current.version, "contentHash": current.content_hash} if current else None,
        "after": {"version": target.version, "contentHash": target.content_hash},
        "diff": _diff(
            before, registries.content_text(target), current.version if current else "(none)", target.version
        ),
    }
    return Planned(
        payload=request.model_dump(mode="json", by_alias=True),
        preview=preview,
        target=f"label {request.label} of {request.registry_ref}/{request.name}",
    )


def _plan_policy(session: Session, org_id: str, org_slug: str, payload: dict[str, Any]) -> Planned:
    if "policyId" not in payload:
        created = _parsed(CreatePolicy, payload, org_slug)
        after = {field: getattr(created, field) for field in POLICY_FIELDS}
        return _policy_plan(created, None, None, after, f"policy {created.name} (new)")
    change: PolicyUpdateChange | PolicyDeleteChange = (
        _parsed(PolicyDeleteChange, payload, org_slug)
        if "delete" in payload
        else _parsed(PolicyUpdateChange, payload, org_slug)
    )
    policy = governance.get_policy(session, org_id=org_id, policy_id=change.policy_id)
    before = {field: getattr(policy, field) for field in POLICY_FIELDS}
    if isinstance(change, PolicyDeleteChange):
        return _policy_plan(change, policy, before, None, f"policy {policy.name} (delete)")
    after = before | {field: getattr(change, field) for field in change.model_fields_set & set(POLICY_FIELDS)}
    return _policy_plan(change, policy, before, after, f"policy {policy.name}")


def _policy_plan(
    change: BaseModel,
    policy: PolicyRow | None,
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
    target: str,
) -> Planned:
    preview = {
        "action": "create" if policy is None else "delete" if after is None else "update",
        "policyId": policy.id if policy else None,
        "before": {"version": policy.version, **_camel(before)} if policy and before else None,
        "after": _camel(after) if after else None,
        "diff": _diff(
            _policy_text(before), _policy_text(after), "current" if policy else "(none)", "proposed"
        ),
    }
    return Planned(
        payload=change.model_dump(mode="json", by_alias=True, exclude_unset=True),
        preview=preview,
        target=target,
    )


_PLANNERS: dict[str, Callable[[Session, str, str, dict[str, Any]], Planned]] = {
    "deployment": _plan_deployment,
    "label": _plan_label,
    "policy": _plan_policy,
}


Shape = TypeVar("Shape", bound=BaseModel)


def _parsed(shape: type[Shape], payload: dict[str, Any], org_slug: str) -> Shape:
    """The payload as the direct call's body; its orgSlug, when it has one, is the request's."""
    values = dict(payload)
    if "org_slug" in shape.model_fields:
        values.setdefault("orgSlug", org_slug)
        if values["orgSlug"] != org_slug:
            raise InvalidInput(
                f"payload.orgSlug must be '{org_slug}', the request's organization", field="payload.orgSlug"
            )
    try:
        return shape.model_validate(values)
    except ValidationError as invalid:
        error = invalid.errors()[0]
        field = ".".join(["payload", *(str(part) for part in error["loc"])])
        raise InvalidInput(f"Invalid payload: {field}: {error['msg']}", field=field) from None


# -- reviewing ------------------------------------------------------------------------------


def review(
    session: Session, *, caller: Caller, org_id: str, change_request_id: str, verdict: str, comment: str
) -> ChangeRequest:
    """Approve or reject as a member holding the change's role who did not request it, once. The
    last approval needed applies the change in this transaction (or ends the request `conflict`)."""
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
    if verdict == "reject":
        _decide(session, row, "rejected")
    elif sum(review.verdict == "approve" for review in row.reviews) >= row.required_approvals:
        _apply(session, row)
    return _record(row, ttl)


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
    _decide(session, row, "cancelled")
    return _record(row, ttl)


def expire_change_requests(db: Database, _settings: Settings) -> bool:
    """Worker task: mark `expired` (and announce) the open requests past their organization's TTL,
    so that an expiry is notified even if nobody reads the request."""
    # A read first: an idle worker must not take SQLite's write lock every round.
    with db.session() as session:
        if not _overdue(session, lock=False):
            return False
    with db.session(write=True) as session:
        for row in _overdue(session, lock=True):
            _decide(session, row, "expired")
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


def _apply(session: Session, row: ChangeRequestRow) -> None:
    """Apply the change as previewed, or end `conflict` (applying nothing) if its target moved."""
    try:
        with session.begin_nested():
            row.result = _APPLIERS[row.kind](session, row)
    except ServiceError as moved:
        row.conflict = moved.message
        _decide(session, row, "conflict")
        return
    _decide(session, row, "applied")


def _apply_deployment(session: Session, row: ChangeRequestRow) -> dict[str, Any]:
    request = DeploymentRequest.model_validate(row.payload)
    environment, planned = deployments.plan_deployment(session, org_id=row.org_id, request=request)
    deployed = {plan.agent.stable_key: _deployed(plan.current) for plan in planned}
    if deployed != row.preview["before"]:
        raise Moved(f"What runs in environment '{environment.name}' changed since the request was opened")
    job = deployments.create_job(session, org_id=row.org_id, request=request, reviewed=True)
    return {"jobId": job.id, "environmentId": environment.id}


def _apply_label(session: Session, row: ChangeRequestRow) -> dict[str, Any]:
    request = MoveLabel.model_validate(row.payload)
    current, _ = registries.label_move(
        session,
        org_id=row.org_id,
        ref=request.registry_ref,
        name=request.name,
        label=request.label,
        version=request.version,
    )
    before = row.preview["before"]
    if (current.version if current else None) != (before["version"] if before else None):
        raise Moved(f"Label '{request.label}' was moved since the request was opened")
    registries.move_label(session, org_id=row.org_id, request=request, reviewed=True)
    return {
        "registryRef": request.registry_ref,
        "name": request.name,
        "label": request.label,
        "version": request.version,
    }


def _apply_policy(session: Session, row: ChangeRequestRow) -> dict[str, Any]:
    action, payload = row.preview["action"], row.payload
    if action == "create":
        policy = governance.create_policy(
            session, org_id=row.org_id, request=CreatePolicy.model_validate(payload), reviewed=True
        )
        return {"policyId": policy.id, "version": policy.version}
    policy = governance.get_policy(session, org_id=row.org_id, policy_id=payload["policyId"])
    if policy.version != row.preview["before"]["version"]:
        raise Moved(f"Policy '{policy.name}' changed since the request was opened")
    if action == "delete":
        governance.delete_policy(session, org_id=row.org_id, policy_id=policy.id, reviewed=True)
        return {"policyId": policy.id, "deleted": True}
    change = PolicyUpdateChange.model_validate(payload)
    governance.update_policy(session, org_id=row.org_id, policy_id=policy.id, request=change, reviewed=True)
    return {"policyId": policy.id, "version": policy.version}


_APPLIERS: dict[str, Callable[[Session, ChangeRequestRow], dict[str, Any]]] = {
    "deployment": _apply_deployment,
    "label": _apply_label,
    "policy": _apply_policy,
}


def _decide(session: Session, row: ChangeRequestRow, status: str) -> None:
    row.status = status
    row.decided_at = utcnow()
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
    return _record(row, _ttl(session, org_id))


def list_change_requests(
    session: Session,
    *,
    org_id: str,
    statuses: Sequence[str],
    kinds: Sequence[str],
    limit: int,
    cursor: str | None,
) -> tuple[list[ChangeRequest], str | None]:
    """Change requests newest first, of the given statuses (as answers show them) and kinds."""
    if cursor is not None and not is_id(cursor, "chg"):
        raise InvalidCursor
    ttl = _ttl(session, org_id)
    query = select(ChangeRequestRow).where(ChangeRequestRow.org_id == org_id)
    if statuses:
        query = query.where(_shown_as(statuses, utcnow() - ttl))
    if kinds:
        query = query.where(ChangeRequestRow.kind.in_(kinds))
    if cursor is not None:
        query = query.where(ChangeRequestRow.id < cursor)
    rows = list(session.scalars(query.order_by(ChangeRequestRow.id.desc()).limit(limit + 1)))
    next_cursor = rows[limit - 1].id if len(rows) > limit else None
    return [_record(row, ttl) for row in rows[:limit]], next_cursor


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


def _record(row: ChangeRequestRow, ttl: timedelta) -> ChangeRequest:
    reviews = [_review(review) for review in row.reviews]
    return ChangeRequest(
        id=row.id,
        kind=row.kind,
        status=_status(row, ttl),
        target=row.target,
        reason=row.reason,
        payload=row.payload,
        preview=row.preview,
        requested_by=Requester(
            key_id=row.requested_by_key_id,
            key_name=row.requested_by_key_name,
            member_id=row.requested_by_member_id,
            email=row.requested_by_email,
        ),
        required_approvals=row.required_approvals,
        approvals=[review for review in reviews if review.verdict == "approve"],
        rejection=next((review for review in reviews if review.verdict == "reject"), None),
        result=row.result,
        conflict=row.conflict,
        created_at=row.created_at,
        expires_at=row.created_at + ttl,
        decided_at=row.decided_at,
    )


def _review(row: ChangeReviewRow) -> Review:
    return Review(
        member_id=row.member_id,
        email=row.member_email,
        key_id=row.key_id,
        verdict=row.verdict,
        comment=row.comment,
        created_at=row.created_at,
    )


# -- helpers --------------------------------------------------------------------------------


def _require_role(caller: Caller, kind: str, doing: str) -> None:
    needed = CHANGE_ROLES[kind]
    if not role_at_least(caller.role, needed):
        raise InsufficientRole(needed=needed, held=caller.role, action=f"{doing} a {kind} change request")


def _deployed(current: AgentDeploymentRow | None) -> dict[str, Any] | None:
    """What runs of an agent in an environment, as a deployment's preview pins it."""
    return None if current is None else {"version": current.version, "configHash": current.config_hash}


def _diff(before: str, after: str, before_name: str, after_name: str) -> str:
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), before_name, after_name
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def _policy_text(fields: dict[str, Any] | None) -> str:
    if not fields:
        return ""
    head = f"name: {fields['name']}\ncategory: {fields['category']}\nseverity: {fields['severity']}\n"
    return f"{head}description: {fields['description']}\n\n{fields['rule_text']}\n"


def _camel(fields: dict[str, Any] | None) -> dict[str, Any]:
    return {("ruleText" if key == "rule_text" else key): value for key, value in (fields or {}).items()}


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

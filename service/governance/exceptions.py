"""Policy exceptions: a time-boxed pass through a deny policy for an agent, an environment or both.

Where the organization requires approval of policies, an exception is a change of policy too: it is
asked for through a change request of kind `policy` whose payload is this body with
`"exception": true`, and granted when that is approved."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from api.approvals import ChangeRequestRef
from api.governance import CreatePolicyException
from service.errors import InvalidInput, NotFound
from service.governance.models import PolicyExceptionRow
from service.governance.service import get_policy, require_review_of_policies
from service.storage.db import utcnow

LONGEST_EXCEPTION = timedelta(days=90)


def create_exception(
    session: Session,
    *,
    org_id: str,
    request: CreatePolicyException,
    created_by: str,
    change_request: ChangeRequestRef | None = None,
) -> PolicyExceptionRow:
    """Grant an exception; where the organization requires approval of policies, only an approved
    change request does (`change_request`, kind `policy` with `"exception": true`)."""
    if change_request is None:
        require_review_of_policies(
            session, org_id=org_id, payload='this request\'s body with "exception": true'
        )
    policy = get_policy(session, org_id=org_id, policy_id=request.policy_id)
    if request.agent_stable_key is None and request.environment_name is None:
        raise InvalidInput(
            "An exception names an agentStableKey, an environmentName or both", field="agentStableKey"
        )
    now = utcnow()
    if request.expires_at <= now:
        raise InvalidInput("expiresAt must be in the future", field="expiresAt")
    if request.expires_at > now + LONGEST_EXCEPTION:
        raise InvalidInput(f"expiresAt may be at most {LONGEST_EXCEPTION.days} days ahead", field="expiresAt")
    exception = PolicyExceptionRow(
        org_id=org_id,
        policy_id=policy.id,
        agent_stable_key=request.agent_stable_key,
        environment_name=request.environment_name,
        reason=request.reason,
        expires_at=request.expires_at,
        created_by=created_by,
    )
    session.add(exception)
    session.flush()
    return exception


def list_exceptions(
    session: Session, *, org_id: str, limit: int, offset: int
) -> tuple[list[PolicyExceptionRow], int]:
    condition = PolicyExceptionRow.org_id == org_id
    total = session.scalar(select(func.count()).select_from(PolicyExceptionRow).where(condition)) or 0
    query = (
        select(PolicyExceptionRow)
        .where(condition)
        .order_by(PolicyExceptionRow.created_at.desc(), PolicyExceptionRow.id.desc())
    )
    return list(session.scalars(query.limit(limit).offset(offset))), total


def revoke_exception(session: Session, *, org_id: str, exception_id: str) -> PolicyExceptionRow:
    exception = session.scalar(
        select(PolicyExceptionRow).where(
            PolicyExceptionRow.id == exception_id, PolicyExceptionRow.org_id == org_id
        )
    )
    if exception is None:
        raise NotFound(f"No exception '{exception_id}' in this organization", field="exceptionId")
    if exception.revoked_at is None:
        exception.revoked_at = utcnow()
        session.flush()
    return exception

"""How a change request's approvals stand against the rules and the approvers of the moment: the
number it needs is its environment's `requiredApprovals` as they are now, and an approval counts
only while its member is active and holds the change's role. Read whenever an open request is
shown or decided, so a rule or a role changed after the request was opened is what decides it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from api.changes import CHANGE_ROLES
from api.members import role_at_least
from service.changes.models import ChangeRequestRow, ChangeReviewRow
from service.environments.models import EnvironmentRow
from service.members.models import MemberRow

# A request whose rule was lowered or removed still needs one approval: nothing applies unreviewed.
LEAST_APPROVALS = 1


@dataclass(frozen=True)
class Standing:
    """The approvals a request needs now, and why those that do not count do not (by review id)."""

    required: int
    not_counted: dict[int, str]

    def counted(self, row: ChangeRequestRow) -> list[ChangeReviewRow]:
        """The request's approvals that count, in the order they were given."""
        return [
            review
            for review in row.reviews
            if review.verdict == "approve" and review.id not in self.not_counted
        ]

    def approved(self, row: ChangeRequestRow) -> bool:
        return len(self.counted(row)) >= self.required


def standings(session: Session, rows: Sequence[ChangeRequestRow]) -> dict[str, Standing]:
    """Each request's standing now: two queries for any number of requests."""
    protected = _protected_environments(
        session, {row.environment_id for row in rows if row.environment_id is not None}
    )
    approvals = [review for row in rows for review in row.reviews if review.verdict == "approve"]
    members = _members(session, {review.member_id for review in approvals})
    return {
        row.id: Standing(
            required=protected.get(row.environment_id, LEAST_APPROVALS),
            not_counted={
                review.id: reason
                for review in row.reviews
                if review.verdict == "approve"
                and (reason := _not_counted_because(review, members.get(review.member_id), row.kind))
            },
        )
        for row in rows
    }


def _not_counted_because(review: ChangeReviewRow, member: MemberRow | None, kind: str) -> str | None:
    if member is None or not member.active:
        return f"{review.member_email} has been deactivated since approving"
    needed = CHANGE_ROLES[kind]
    if not role_at_least(member.role, needed):
        return f"{review.member_email} is now {member.role}; a {kind} change needs {needed}"
    return None


def _protected_environments(session: Session, environment_ids: set[str]) -> dict[str | None, int]:
    """The required approvals of those of the environments that are protected now."""
    if not environment_ids:
        return {}
    query = select(EnvironmentRow.id, EnvironmentRow.required_approvals).where(
        EnvironmentRow.id.in_(environment_ids), EnvironmentRow.protected
    )
    return {environment_id: required for environment_id, required in session.execute(query)}


def _members(session: Session, member_ids: set[str]) -> dict[str, MemberRow]:
    if not member_ids:
        return {}
    return {
        member.id: member for member in session.scalars(select(MemberRow).where(MemberRow.id.in_(member_ids)))
    }

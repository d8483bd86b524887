"""The change request that made a row (a deployment job, a label's move, a policy version, an audit
event), as the row's answers name it: who asked and whose approvals counted. Written as JSON by the
database, so a list names it in the query that reads the page."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

from sqlalchemy import ColumnElement, case, func, literal_column, null, select
from sqlalchemy.dialects.postgresql import aggregate_order_by
from sqlalchemy.orm import Session

from api.approvals import Approver, ChangeRequestRef, Requester
from service.changes.models import ChangeRequestRow, ChangeReviewRow
from service.storage.db import dialect_name
from service.storage.jsonsql import json_text, model_json


def change_request_json(dialect: str, change_request_id: ColumnElement[Any]) -> ColumnElement[Any]:
    """The ChangeRequestRef of the request `change_request_id` (a column of the outer query) names,
    a JSON value to nest; null for a row made directly, without looking anything up."""
    request = ChangeRequestRow
    found = select(_reference(dialect)).where(request.id == change_request_id).scalar_subquery()
    return case((change_request_id.is_(None), null()), else_=found)


def change_request_references(
    session: Session, ids: Iterable[str | None]
) -> dict[str | None, ChangeRequestRef]:
    """The references of these requests, in one query; a row made directly (None) has none."""
    wanted = {change_request_id for change_request_id in ids if change_request_id is not None}
    if not wanted:
        return {}
    dialect = dialect_name(session)
    query = select(ChangeRequestRow.id, json_text(dialect, _reference(dialect))).where(
        ChangeRequestRow.id.in_(wanted)
    )
    return {
        change_request_id: ChangeRequestRef.model_validate_json(reference)
        for change_request_id, reference in session.execute(query)
    }


@functools.cache
def _reference(dialect: str) -> ColumnElement[Any]:
    """A change_requests row's ChangeRequestRef: its requester, and the approvals that counted when
    it was decided, in the order they were given."""
    request, review = ChangeRequestRow, ChangeReviewRow
    requester = model_json(
        dialect,
        Requester,
        {
            "key_id": request.requested_by_key_id,
            "key_name": request.requested_by_key_name,
            "member_id": request.requested_by_member_id,
            "email": request.requested_by_email,
        },
    )
    counted = (
        review.change_request_id == request.id,
        review.verdict == "approve",
        review.not_counted_because.is_(None),
    )
    if dialect == "postgresql":
        approver = model_json(
            dialect, Approver, {"member_id": review.member_id, "email": review.member_email}
        )
        in_order = func.json_agg(aggregate_order_by(approver, review.id))
        approvers = select(func.coalesce(in_order, literal_column("'[]'::json"))).where(*counted)
    else:
        # SQLite aggregates the rows of an ordered subquery in their order.
        ordered = select(review.member_id, review.member_email).where(*counted).order_by(review.id)
        rows = ordered.correlate(request).subquery()
        approver = model_json(
            dialect, Approver, {"member_id": rows.c.member_id, "email": rows.c.member_email}
        )
        approvers = select(func.json(func.json_group_array(approver)))
    return model_json(
        dialect,
        ChangeRequestRef,
        {"id": request.id, "requested_by": requester, "approved_by": approvers.scalar_subquery()},
    )

"""Reading the audit trail: newest first, filtered, a page at a time. Nothing here writes to it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, Row, Select, false, select
from sqlalchemy.orm import Session

from api.audit import AuditQuery
from service.audit.models import AuditEventRow
from service.errors import InvalidCursor
from service.ids import first_id_at, is_id
from service.members.models import MemberRow

EVENT_PREFIX = "aud"


@dataclass(frozen=True)
class AuditPage:
    events: list[Row[Any]]
    next_cursor: str | None


def list_events(session: Session, *, org_id: str, query: AuditQuery) -> AuditPage:
    """Events newest first. Ids are time-ordered, so the date range and the cursor are id bounds and
    every filter is a seek on an index that ends in the id; no total is counted (a million events
    would cost a scan): `nextCursor` walks them."""
    if query.cursor is not None and not is_id(query.cursor, EVENT_PREFIX):
        raise InvalidCursor
    statement = _filtered(session, org_id=org_id, query=query)
    limit, offset = query.pagination.limit, query.pagination.offset
    # Plain rows on the session's connection: a page of entities would cost as much again.
    page = statement.order_by(AuditEventRow.id.desc()).offset(offset).limit(limit + 1)
    rows = list(session.connection().execute(page))
    next_cursor = rows[limit - 1].id if len(rows) > limit else None
    return AuditPage(events=rows[:limit], next_cursor=next_cursor)


def _filtered(session: Session, *, org_id: str, query: AuditQuery) -> Select[tuple[AuditEventRow]]:
    statement = select(AuditEventRow).where(AuditEventRow.org_id == org_id)
    if query.actor:
        statement = statement.where(_actor_condition(session, org_id=org_id, actor=query.actor))
    if query.action:
        statement = statement.where(AuditEventRow.action == query.action)
    if query.target_type:
        statement = statement.where(AuditEventRow.target_type == query.target_type)
    if query.target_id:
        statement = statement.where(AuditEventRow.target_id == query.target_id)
    if query.date_range.start:
        statement = statement.where(AuditEventRow.id >= first_id_at(EVENT_PREFIX, query.date_range.start))
    if query.date_range.end:
        statement = statement.where(AuditEventRow.id < first_id_at(EVENT_PREFIX, query.date_range.end))
    if query.cursor:
        statement = statement.where(AuditEventRow.id < query.cursor)
    return statement


def _actor_condition(session: Session, *, org_id: str, actor: str) -> ColumnElement[bool]:
    """A key id, a member id, or a member's email (found as the member, so one index serves it)."""
    if actor.startswith("key_"):
        return AuditEventRow.actor_key_id == actor
    if "@" in actor:
        member_id = session.scalar(
            select(MemberRow.id).where(MemberRow.org_id == org_id, MemberRow.email == actor.lower())
        )
        return AuditEventRow.actor_member_id == member_id if member_id else false()
    return AuditEventRow.actor_member_id == actor

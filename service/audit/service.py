"""Reading the audit trail: newest first, filtered, a page at a time, and counted per day. Nothing
here writes to it."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import date, timedelta

from sqlalchemy import ColumnElement, Select, case, false, func, select
from sqlalchemy.orm import Session

from api.audit import (
    STATS_DEFAULT_DAYS,
    STATS_MAX_DAYS,
    ActionDayCount,
    ActorCount,
    AuditActor,
    AuditEvent,
    AuditQuery,
    AuditStats,
    AuditStatsQuery,
    AuditTarget,
)
from service.errors import InvalidCursor, InvalidInput
from service.members.models import MemberRow
from service.storage.db import dialect_name, utc_day, utcnow
from service.storage.ids import first_id_at, is_id
from service.storage.jsonsql import json_text, model_json, model_json_of, stored_json
from service.trail.models import AuditEventRow

EVENT_PREFIX = "aud"


@dataclass(frozen=True)
class AuditPage:
    events: list[str]  # each an AuditEvent's JSON
    next_cursor: str | None


def list_events(session: Session, *, org_id: str, query: AuditQuery) -> AuditPage:
    """Events newest first. Ids are time-ordered, so the date range and the cursor are id bounds and
    every filter is a seek on an index that ends in the id; no total is counted (a million events
    would cost a scan): `nextCursor` walks them."""
    if query.cursor is not None and not is_id(query.cursor, EVENT_PREFIX):
        raise InvalidCursor
    statement = _filtered(session, org_id=org_id, query=query)
    limit, offset = query.pagination.limit, query.pagination.offset
    page = statement.order_by(AuditEventRow.id.desc()).offset(offset).limit(limit + 1)
    rows = session.connection().execute(page).all()
    next_cursor = rows[limit - 1].id if len(rows) > limit else None
    return AuditPage(events=[row.event for row in rows[:limit]], next_cursor=next_cursor)


@functools.cache
def event_json(dialect: str) -> ColumnElement[str]:
    """An event's AuditEvent JSON, made by the database (with the change request that applied the
    change, if one did)."""
    event = AuditEventRow
    actor = {name: getattr(event, f"actor_{name}") for name in AuditActor.model_fields}
    actor["claims"] = stored_json(dialect, event.actor_claims)
    target = {name: getattr(event, f"target_{name}") for name in AuditTarget.model_fields}
    made = model_json_of(
        dialect,
        AuditEvent,
        event,
        actor=model_json(dialect, AuditActor, actor),
        target=model_json(dialect, AuditTarget, target),
        changes=stored_json(dialect, event.changes),
        change_request=stored_json(dialect, event.change_request),
    )
    return json_text(dialect, made).label("event")


def _filtered(session: Session, *, org_id: str, query: AuditQuery) -> Select[tuple[str, str]]:
    event_json_column = event_json(dialect_name(session))
    statement = select(AuditEventRow.id, event_json_column).where(AuditEventRow.org_id == org_id)
    statement = statement.where(
        *_narrowed(
            session, org_id=org_id, actor=query.actor, action=query.action, target_type=query.target_type
        )
    )
    if query.target_id:
        statement = statement.where(AuditEventRow.target_id == query.target_id)
    if query.date_range.start:
        statement = statement.where(AuditEventRow.id >= first_id_at(EVENT_PREFIX, query.date_range.start))
    if query.date_range.end:
        statement = statement.where(AuditEventRow.id < first_id_at(EVENT_PREFIX, query.date_range.end))
    if query.cursor:
        statement = statement.where(AuditEventRow.id < query.cursor)
    return statement


def _narrowed(
    session: Session, *, org_id: str, actor: str | None, action: str | None, target_type: str | None
) -> list[ColumnElement[bool]]:
    """The conditions of the filters given, shared by the list of events and their counts."""
    conditions = []
    if actor:
        conditions.append(_actor_condition(session, org_id=org_id, actor=actor))
    if action:
        conditions.append(AuditEventRow.action == action)
    if target_type:
        conditions.append(AuditEventRow.target_type == target_type)
    return conditions


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


def stats(session: Session, *, org_id: str, query: AuditStatsQuery) -> AuditStats:
    """Changes per UTC day and action, and per actor, over the period: counted in SQL on one range
    of the (org_id, occurred_at, action) index, never by loading the events."""
    end = query.date_range.end or utcnow()
    start = query.date_range.start or end - timedelta(days=STATS_DEFAULT_DAYS)
    if start >= end:
        raise InvalidInput("dateRange: start must be before end", field="dateRange")
    if end - start > timedelta(days=STATS_MAX_DAYS):
        raise InvalidInput(f"dateRange covers at most {STATS_MAX_DAYS} days", field="dateRange")
    in_period = (
        AuditEventRow.org_id == org_id,
        AuditEventRow.occurred_at >= start,
        AuditEventRow.occurred_at < end,
        *_narrowed(
            session, org_id=org_id, actor=query.actor, action=query.action, target_type=query.target_type
        ),
    )
    day = utc_day(session, AuditEventRow.occurred_at)
    by_day = (
        select(day, AuditEventRow.action, func.count())
        .where(*in_period)
        .group_by(day, AuditEventRow.action)
        .order_by(day, AuditEventRow.action)
    )
    per_day = [
        ActionDayCount(day=date.fromisoformat(day_text), action=action, count=count)
        for day_text, action, count in session.execute(by_day)
    ]
    # A member is one actor whichever of their keys they used; a service key is an actor itself.
    without_member = AuditEventRow.actor_member_id.is_(None)
    actor = (
        AuditEventRow.actor_member_id,
        AuditEventRow.actor_member_email,
        case((without_member, AuditEventRow.actor_key_id)),
        case((without_member, AuditEventRow.actor_key_name)),
    )
    by_actor = select(*actor, func.count()).where(*in_period).group_by(*actor)
    per_actor = sorted(
        (
            ActorCount(member_id=member_id, member_email=email, key_id=key_id, key_name=key_name, count=count)
            for member_id, email, key_id, key_name, count in session.execute(by_actor)
        ),
        key=lambda counted: (-counted.count, counted.member_email or counted.key_name or ""),
    )
    return AuditStats(
        start=start, end=end, total=sum(c.count for c in per_day), per_day=per_day, per_actor=per_actor
    )

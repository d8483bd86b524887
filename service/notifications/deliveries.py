"""Deliveries of notifications: the list, one with its attempts, resend and recovery of a channel."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import (
    func,
    select,
    tuple_,
    update,
)
from sqlalchemy.orm import Session

from api.notifications import Delivery as DeliveryRecord
from api.notifications import (
    DeliveryAttempt,
    DeliveryDetail,
    DeliveryEvent,
    DeliveryQuery,
    DeliveryRequest,
    RecoverRequest,
)
from service.errors import NotFound
from service.events.models import EventRow
from service.notifications.logs import decode_cursor, encode_cursor
from service.notifications.messages import Message, content
from service.notifications.models import (
    ChannelRow,
    DeliveryLogRow,
    DeliveryRow,
)
from service.notifications.service import get_channel, not_in_flight, refuse_disabled
from service.orgs.models import OrganizationRow
from service.settings import Settings
from service.storage.db import utcnow

# States a recovery sends again.
RECOVERABLE = ("failed", "dead", "held")

_DELIVERY_COLUMNS = (
    DeliveryRow.id,
    DeliveryRow.event_id,
    DeliveryRow.event_type,
    DeliveryRow.channel_id,
    ChannelRow.name.label("channel_name"),
    ChannelRow.kind.label("channel_kind"),
    DeliveryRow.status,
    DeliveryRow.attempts,
    DeliveryRow.created_at,
    DeliveryRow.last_attempt_at,
    DeliveryRow.next_attempt_at,
    DeliveryRow.last_response_status,
    DeliveryRow.last_error,
)


@dataclass(frozen=True)
class DeliveryPage:
    items: list[DeliveryRecord]
    total: int
    next_cursor: str | None


def list_deliveries(session: Session, *, org_id: str, query: DeliveryQuery) -> DeliveryPage:
    """Deliveries, newest first, by offset or after a cursor; `total` counts every match."""
    matches = [DeliveryRow.org_id == org_id]
    for column, value in (
        (DeliveryRow.channel_id, query.channel_id),
        (DeliveryRow.event_type, query.event_type),
        (DeliveryRow.event_id, query.event_id),
    ):
        if value is not None:
            matches.append(column == value)
    if query.status:
        matches.append(DeliveryRow.status.in_(query.status))
    if query.date_range.start:
        matches.append(DeliveryRow.created_at >= query.date_range.start)
    if query.date_range.end:
        matches.append(DeliveryRow.created_at < query.date_range.end)
    total = session.scalar(select(func.count()).select_from(DeliveryRow).where(*matches)) or 0
    page = (
        select(*_DELIVERY_COLUMNS).join(ChannelRow, ChannelRow.id == DeliveryRow.channel_id).where(*matches)
    )
    if query.cursor:
        created_at, delivery_id = decode_cursor(query.cursor)
        page = page.where(tuple_(DeliveryRow.created_at, DeliveryRow.id) < tuple_(created_at, delivery_id))
    limit = query.pagination.limit
    page = page.order_by(DeliveryRow.created_at.desc(), DeliveryRow.id.desc())
    rows = session.execute(page.offset(query.pagination.offset).limit(limit + 1)).all()
    items = [DeliveryRecord.model_validate(row._mapping) for row in rows[:limit]]
    last = items[-1] if len(rows) > limit else None
    return DeliveryPage(items, total, encode_cursor(last.created_at, last.id) if last else None)


def _delivery(session: Session, *, org_id: str, delivery_id: str) -> DeliveryRow:
    delivery = session.scalar(
        select(DeliveryRow).where(DeliveryRow.id == delivery_id, DeliveryRow.org_id == org_id)
    )
    if delivery is None:
        raise NotFound(f"No delivery '{delivery_id}' in this organization", field="deliveryId")
    return delivery


def delivery_record(session: Session, delivery: DeliveryRow) -> DeliveryRecord:
    row = session.execute(
        select(*_DELIVERY_COLUMNS)
        .join(ChannelRow, ChannelRow.id == DeliveryRow.channel_id)
        .where(DeliveryRow.id == delivery.id)
    ).one()
    return DeliveryRecord.model_validate(row._mapping)


def get_delivery(session: Session, *, org_id: str, delivery_id: str, settings: Settings) -> DeliveryDetail:
    """A delivery with its event, what every attempt sends, and each attempt with its answer."""
    delivery = _delivery(session, org_id=org_id, delivery_id=delivery_id)
    event = session.get_one(EventRow, delivery.event_id)
    channel = session.get_one(ChannelRow, delivery.channel_id)
    org_slug = session.scalar(select(OrganizationRow.slug).where(OrganizationRow.id == org_id)) or ""
    message = Message(
        delivery_id=delivery.id,
        event_id=event.id,
        event_type=event.type,
        occurred_at=event.occurred_at,
        org_slug=org_slug,
        payload=event.payload,
        channel_kind=channel.kind,
        channel_config=channel.config,
    )
    sent = content(message, settings)
    attempts = session.scalars(
        select(DeliveryLogRow)
        .where(DeliveryLogRow.delivery_id == delivery.id)
        .order_by(DeliveryLogRow.attempt)
    )
    return DeliveryDetail(
        **delivery_record(session, delivery).model_dump(),
        event=DeliveryEvent(
            id=event.id, type=event.type, occurred_at=event.occurred_at, payload=event.payload
        ),
        request=DeliveryRequest(
            method="SMTP" if channel.kind == "email" else "POST",
            destination=sent.destination,
            content_type=sent.content_type,
            body=sent.body.decode(errors="replace"),
        ),
        attempt_log=[
            DeliveryAttempt(
                id=attempt.id,
                attempt=attempt.attempt,
                status=attempt.status,
                created_at=attempt.created_at,
                latency_ms=attempt.latency_ms,
                error=attempt.error,
                next_attempt_at=attempt.next_attempt_at,
                request_headers=attempt.request_headers or {},
                response_status=attempt.response_status,
                response_headers=attempt.response_headers or {},
                response_body=attempt.response_body,
            )
            for attempt in attempts
        ],
    )


def resend(session: Session, *, org_id: str, delivery_id: str) -> DeliveryRow:
    """Queue an attempt now, whatever the delivery's state, with a new round of retries after it.

    A delivery being attempted right now is left to that attempt. The message keeps its id, so a
    receiver that already has it can tell it is the same one.
    """
    delivery = _delivery(session, org_id=org_id, delivery_id=delivery_id)
    refuse_disabled(session.get_one(ChannelRow, delivery.channel_id), "resend its deliveries")
    now = utcnow()
    session.execute(
        update(DeliveryRow)
        .where(DeliveryRow.id == delivery.id, not_in_flight(now))
        .values(status="pending", next_attempt_at=now, schedule_from=DeliveryRow.attempts)
    )
    session.refresh(delivery)
    return delivery


def recover(session: Session, *, org_id: str, channel_id: str, request: RecoverRequest) -> int:
    """Queue again the channel's failed, dead and held deliveries made in [since, until); how many."""
    since, until = request.since, request.until
    channel = get_channel(session, org_id=org_id, channel_id=channel_id)
    refuse_disabled(channel, "recover its deliveries")
    now = utcnow()
    window = [DeliveryRow.created_at >= since] + ([DeliveryRow.created_at < until] if until else [])
    result = session.execute(
        update(DeliveryRow)
        .where(
            DeliveryRow.org_id == org_id,
            DeliveryRow.channel_id == channel.id,
            DeliveryRow.status.in_(RECOVERABLE),
            *window,
            not_in_flight(now),
        )
        .values(status="pending", next_attempt_at=now, schedule_from=DeliveryRow.attempts)
        .execution_options(synchronize_session=False)
    )
    return result.rowcount

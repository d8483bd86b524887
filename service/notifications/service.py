"""Notification channels, subscriptions, deliveries (resend, recover) and the delivery log.

What is sent is in messages.py, the queue the workers work from in queue.py, the sending in sender.py.
"""

from __future__ import annotations

import base64
import functools
import json
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Connection,
    FromClause,
    ScalarSelect,
    Select,
    Text,
    bindparam,
    cast,
    delete,
    func,
    literal_column,
    or_,
    select,
    tuple_,
    update,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from api.common import format_timestamp
from api.notifications import (
    LOG_STATUSES,
    ChannelConfigInput,
    ChannelCounts,
    DateRange,
    DayCounts,
    DeliveryAttempt,
    DeliveryDetail,
    DeliveryEvent,
    DeliveryQuery,
    DeliveryRequest,
    LogEntry,
    LogQuery,
    LogStats,
    UpdateChannel,
)
from api.notifications import Delivery as DeliveryRecord
from service.crypto import Cipher, reencrypt_column
from service.db import UTCDateTime, dialect_name, insert_unless_taken, utc_day, utcnow
from service.errors import AlreadyExists, InvalidCursor, InvalidInput, NotFound
from service.events.models import Event
from service.events.service import record_event
from service.notifications.messages import Message, content
from service.notifications.models import (
    Channel,
    Delivery,
    DeliveryLog,
    DeliveryLogCount,
    Subscription,
)
from service.orgs.models import Organization
from service.outbound import OutboundRefused, check_url_syntax
from service.settings import Settings
from service.webhooks import new_secret

# States a recovery sends again, and those a disabled channel holds instead of sending.
RECOVERABLE = ("failed", "dead", "held")
WAITING = ("pending", "failed")


@dataclass(frozen=True)
class CreatedChannel:
    record: Channel
    signing_secret: str | None


def create_channel(
    session: Session, *, org_id: str, name: str, kind: str, config: ChannelConfigInput, cipher: Cipher
) -> CreatedChannel:
    """Create a channel; a webhook channel gets a signing secret, returned here and never again."""
    shown, secret, signing_secret = _channel_config(kind, config)
    record = Channel(
        org_id=org_id,
        name=name,
        kind=kind,
        config=shown,
        secret_encrypted=cipher.encrypt(secret) if secret else None,
    )
    if not insert_unless_taken(session, record):
        raise AlreadyExists(f"A channel named '{name}' already exists in this organization", field="name")
    return CreatedChannel(record=record, signing_secret=signing_secret)


def _channel_config(kind: str, config: ChannelConfigInput) -> tuple[dict[str, Any], str | None, str | None]:
    """What the channel shows, what it keeps encrypted, and the signing secret to show once."""
    if kind == "email":
        if not config.recipients or config.url is not None:
            raise InvalidInput(
                "An email channel needs config.recipients (and no url)", field="config.recipients"
            )
        return {"recipients": config.recipients}, None, None
    if not config.url or config.recipients is not None:
        raise InvalidInput(f"A {kind} channel needs config.url (and no recipients)", field="config.url")
    try:
        check_url_syntax(config.url)
    except OutboundRefused as exc:
        raise InvalidInput(str(exc), field="config.url") from exc
    if kind == "slack":
        # The Slack URL is itself the credential: kept encrypted, shown by its host only.
        return {"url": f"{urlsplit(config.url).scheme}://{urlsplit(config.url).hostname}/…"}, config.url, None
    signing_secret = new_secret()
    return {"url": config.url}, signing_secret, signing_secret


def list_channels(session: Session, *, org_id: str) -> list[Channel]:
    query = select(Channel).where(Channel.org_id == org_id).order_by(Channel.created_at, Channel.id)
    return list(session.scalars(query))


def get_channel(session: Session, *, org_id: str, channel_id: str) -> Channel:
    channel = session.scalar(select(Channel).where(Channel.id == channel_id, Channel.org_id == org_id))
    if channel is None:
        raise NotFound(f"No notification channel '{channel_id}' in this organization", field="channelId")
    return channel


def delete_channel(session: Session, *, org_id: str, channel_id: str) -> Channel:
    """Delete a channel, its subscriptions and its undelivered deliveries; its logs stay."""
    channel = get_channel(session, org_id=org_id, channel_id=channel_id)
    # Explicit deletes, not only ON DELETE CASCADE: SQLite enforces it only with foreign keys on.
    session.execute(delete(Subscription).where(Subscription.channel_id == channel.id))
    session.execute(delete(Delivery).where(Delivery.channel_id == channel.id))
    session.delete(channel)
    session.flush()
    return channel


def update_channel(
    session: Session, *, org_id: str, channel_id: str, changes: UpdateChannel, actor: str, cipher: Cipher
) -> Channel:
    """Rename a channel, give it a new address of its kind, enable or disable it."""
    channel = get_channel(session, org_id=org_id, channel_id=channel_id)
    now = utcnow()
    if changes.config is not None:
        shown, secret, _ = _channel_config(channel.kind, changes.config)
        channel.config = shown
        if channel.kind == "slack":
            channel.secret_encrypted = cipher.encrypt(secret or "")
    if changes.name is not None and changes.name != channel.name:
        _rename(session, channel, changes.name)
    if changes.enabled is False:
        disable_channel(
            session, channel_id=channel.id, now=now, reason=f"Disabled by {actor} on {format_timestamp(now)}"
        )
    elif changes.enabled is True:
        # Its held deliveries stay held: recovering them is the operator's choice.
        channel.disabled_at = channel.disabled_reason = None
    session.flush()
    return channel


def _rename(session: Session, channel: Channel, name: str) -> None:
    try:
        with session.begin_nested():
            channel.name = name
            session.flush()
    except IntegrityError as exc:
        raise AlreadyExists(
            f"A channel named '{name}' already exists in this organization", field="name"
        ) from exc


def disable_channel(session: Session, *, channel_id: str, now: datetime, reason: str) -> None:
    """Stop sending to a channel: its waiting deliveries are held, and so are those that arrive."""
    channel = session.get(Channel, channel_id)
    if channel is None or channel.disabled_at is not None:
        return
    channel.disabled_at, channel.disabled_reason = now, reason
    session.execute(
        update(Delivery)
        .where(Delivery.channel_id == channel_id, Delivery.status.in_(WAITING), _not_in_flight(now))
        .values(status="held", next_attempt_at=None)
    )


def _not_in_flight(now: datetime) -> ColumnElement[bool]:
    """No worker is making an attempt of the delivery now (a lease it stopped renewing has ended)."""
    return or_(Delivery.lease_expires_at.is_(None), Delivery.lease_expires_at < now)


def rotate_secret(
    session: Session, *, org_id: str, channel_id: str, cipher: Cipher, grace_seconds: float
) -> tuple[Channel, str]:
    """A new signing secret for a webhook channel; the one it replaces still signs for the grace period."""
    channel = get_channel(session, org_id=org_id, channel_id=channel_id)
    if channel.kind != "webhook":
        raise InvalidInput(
            f"Only webhook channels have a signing secret; '{channel.name}' is a {channel.kind} channel",
            field="channelId",
            code="not_a_webhook",
        )
    secret = new_secret()
    keeps_signing = grace_seconds > 0
    channel.previous_secret_encrypted = channel.secret_encrypted if keeps_signing else None
    channel.previous_secret_expires_at = (
        utcnow() + timedelta(seconds=grace_seconds) if keeps_signing else None
    )
    channel.secret_encrypted = cipher.encrypt(secret)
    session.flush()
    return channel, secret


def _refuse_disabled(channel: Channel, action: str) -> None:
    if channel.disabled_at is not None:
        raise InvalidInput(
            f"The channel '{channel.name}' is disabled ({channel.disabled_reason}); enable it to {action}",
            field="channelId",
            code="channel_disabled",
        )


def send_test(session: Session, *, org_id: str, channel_id: str, event_type: str) -> Delivery:
    """Record a test event addressed to this channel alone and queue its delivery."""
    channel = get_channel(session, org_id=org_id, channel_id=channel_id)
    _refuse_disabled(channel, "send a test")
    event = record_event(
        session,
        org_id=org_id,
        type=event_type,
        payload={"test": True, "message": f"A test notification for the channel '{channel.name}'."},
    )
    # Fanned out here, to this channel only: subscribers of the event type must not receive it.
    event.fanned_out_at = now = utcnow()
    delivery = Delivery(
        org_id=org_id, event_id=event.id, event_type=event.type, channel_id=channel.id, next_attempt_at=now
    )
    session.add(delivery)
    session.flush()
    return delivery


def subscribe(
    session: Session, *, org_id: str, channel_id: str, event_type: str, enabled: bool
) -> Subscription:
    """Subscribe a channel to an event type; subscribing again sets `enabled`."""
    channel = get_channel(session, org_id=org_id, channel_id=channel_id)
    existing = _subscription(session, channel_id=channel.id, event_type=event_type)
    if existing is None:
        candidate = Subscription(org_id=org_id, channel_id=channel.id, event_type=event_type, enabled=enabled)
        if insert_unless_taken(session, candidate):
            return candidate
        # A concurrent subscribe created it first: update that one.
        existing = _subscription(session, channel_id=channel.id, event_type=event_type)
        assert existing is not None
    if existing.enabled != enabled:
        existing.enabled = enabled
        existing.updated_at = utcnow()
        session.flush()
    return existing


def unsubscribe(session: Session, *, org_id: str, channel_id: str, event_type: str) -> Subscription:
    channel = get_channel(session, org_id=org_id, channel_id=channel_id)
    existing = _subscription(session, channel_id=channel.id, event_type=event_type)
    if existing is None:
        raise NotFound(f"The channel is not subscribed to '{event_type}'", field="eventType")
    session.delete(existing)
    session.flush()
    return existing


def _subscription(session: Session, *, channel_id: str, event_type: str) -> Subscription | None:
    query = select(Subscription).where(
        Subscription.channel_id == channel_id, Subscription.event_type == event_type
    )
    return session.scalar(query)


def list_subscriptions(session: Session, *, org_id: str, channel_id: str | None) -> list[Subscription]:
    query = select(Subscription).where(Subscription.org_id == org_id)
    if channel_id is not None:
        query = query.where(Subscription.channel_id == channel_id)
    return list(session.scalars(query.order_by(Subscription.channel_id, Subscription.event_type)))


# -- deliveries ---------------------------------------------------------------------------------

_DELIVERY_COLUMNS = (
    Delivery.id,
    Delivery.event_id,
    Delivery.event_type,
    Delivery.channel_id,
    Channel.name.label("channel_name"),
    Channel.kind.label("channel_kind"),
    Delivery.status,
    Delivery.attempts,
    Delivery.created_at,
    Delivery.last_attempt_at,
    Delivery.next_attempt_at,
    Delivery.last_response_status,
    Delivery.last_error,
)


@dataclass(frozen=True)
class DeliveryPage:
    items: list[DeliveryRecord]
    total: int
    next_cursor: str | None


def list_deliveries(session: Session, *, org_id: str, query: DeliveryQuery) -> DeliveryPage:
    """Deliveries, newest first, by offset or after a cursor; `total` counts every match."""
    matches = [Delivery.org_id == org_id]
    for column, value in (
        (Delivery.channel_id, query.channel_id),
        (Delivery.event_type, query.event_type),
        (Delivery.event_id, query.event_id),
    ):
        if value is not None:
            matches.append(column == value)
    if query.status:
        matches.append(Delivery.status.in_(query.status))
    if query.date_range.start:
        matches.append(Delivery.created_at >= query.date_range.start)
    if query.date_range.end:
        matches.append(Delivery.created_at < query.date_range.end)
    total = session.scalar(select(func.count()).select_from(Delivery).where(*matches)) or 0
    page = select(*_DELIVERY_COLUMNS).join(Channel, Channel.id == Delivery.channel_id).where(*matches)
    if query.cursor:
        created_at, delivery_id = _decode_cursor(query.cursor)
        page = page.where(tuple_(Delivery.created_at, Delivery.id) < tuple_(created_at, delivery_id))
    limit = query.pagination.limit
    page = page.order_by(Delivery.created_at.desc(), Delivery.id.desc())
    rows = session.execute(page.offset(query.pagination.offset).limit(limit + 1)).all()
    items = [DeliveryRecord.model_validate(row._mapping) for row in rows[:limit]]
    last = items[-1] if len(rows) > limit else None
    return DeliveryPage(items, total, _encode_cursor(last.created_at, last.id) if last else None)


def _delivery(session: Session, *, org_id: str, delivery_id: str) -> Delivery:
    delivery = session.scalar(select(Delivery).where(Delivery.id == delivery_id, Delivery.org_id == org_id))
    if delivery is None:
        raise NotFound(f"No delivery '{delivery_id}' in this organization", field="deliveryId")
    return delivery


def delivery_record(session: Session, delivery: Delivery) -> DeliveryRecord:
    row = session.execute(
        select(*_DELIVERY_COLUMNS)
        .join(Channel, Channel.id == Delivery.channel_id)
        .where(Delivery.id == delivery.id)
    ).one()
    return DeliveryRecord.model_validate(row._mapping)


def get_delivery(session: Session, *, org_id: str, delivery_id: str, settings: Settings) -> DeliveryDetail:
    """A delivery with its event, what every attempt sends, and each attempt with its answer."""
    delivery = _delivery(session, org_id=org_id, delivery_id=delivery_id)
    event = session.get_one(Event, delivery.event_id)
    channel = session.get_one(Channel, delivery.channel_id)
    org_slug = session.scalar(select(Organization.slug).where(Organization.id == org_id)) or ""
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
        select(DeliveryLog).where(DeliveryLog.delivery_id == delivery.id).order_by(DeliveryLog.attempt)
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


def resend(session: Session, *, org_id: str, delivery_id: str) -> Delivery:
    """Queue an attempt now, whatever the delivery's state, with a new round of retries after it.

    A delivery being attempted right now is left to that attempt. The message keeps its id, so a
    receiver that already has it can tell it is the same one.
    """
    delivery = _delivery(session, org_id=org_id, delivery_id=delivery_id)
    _refuse_disabled(session.get_one(Channel, delivery.channel_id), "resend its deliveries")
    now = utcnow()
    session.execute(
        update(Delivery)
        .where(Delivery.id == delivery.id, _not_in_flight(now))
        .values(status="pending", next_attempt_at=now, schedule_from=Delivery.attempts)
    )
    session.refresh(delivery)
    return delivery


def recover(
    session: Session, *, org_id: str, channel_id: str, since: datetime, until: datetime | None
) -> int:
    """Queue again the channel's failed, dead and held deliveries made in [since, until); how many."""
    channel = get_channel(session, org_id=org_id, channel_id=channel_id)
    _refuse_disabled(channel, "recover its deliveries")
    now = utcnow()
    window = [Delivery.created_at >= since] + ([Delivery.created_at < until] if until else [])
    result = session.execute(
        update(Delivery)
        .where(
            Delivery.org_id == org_id,
            Delivery.channel_id == channel.id,
            Delivery.status.in_(RECOVERABLE),
            *window,
            _not_in_flight(now),
        )
        .values(status="pending", next_attempt_at=now, schedule_from=Delivery.attempts)
        .execution_options(synchronize_session=False)
    )
    return result.rowcount


LOG = DeliveryLog.__table__
COUNTS = DeliveryLogCount.__table__
NEWEST_FIRST = (LOG.c.created_at.desc(), LOG.c.id.desc())
# A log query's filters besides its organization and time: columns of the log and of its counts by
# the same names. Which of them a query gives, and which ends its range has, make its shape.
OPTIONAL_FILTERS = ("event_type", "channel_id", "status")


@dataclass(frozen=True)
class LogPage:
    """A page of the log: each entry as its JSON text, in LogEntry's wire form."""

    entries: list[str]
    total: int
    next_cursor: str | None


def list_logs(session: Session, *, org_id: str, query: LogQuery) -> LogPage:
    """Delivery attempts, newest first: a page by offset (the spec's paging) or after a cursor.

    The hourly counts (DeliveryLogCount) give `total` and let a deep offset start in the hour
    that holds it; the page's ids then come from an index alone and only their rows are read.
    Statements are built once per shape and run with bind parameters, and the database writes the
    entries' JSON: building statements and converting rows in Python cost more than running them.
    """
    values = _filter_values(org_id, query)
    filters = tuple(name for name in OPTIONAL_FILTERS if name in values)
    connection = session.connection()
    count = _count_logs(connection, filters, values, query.date_range)
    start, end = query.date_range.start, query.date_range.end
    offset, limit = query.pagination.offset, query.pagination.limit
    after: tuple[datetime, str] | None = None
    # Each way of going deep replaces the range's end: a database bounds an index scan by one
    # upper bound only, and would otherwise walk every match from the end down.
    if query.cursor:
        after = _decode_cursor(query.cursor)
        if end is not None and end <= after[0]:
            after = None  # the range ends before the cursor: its end alone bounds the page
        else:
            end = None
    elif offset >= count.total:
        return LogPage(entries=[], total=count.total, next_cursor=None)
    elif offset:
        skipped = _skip_whole_hours(connection, filters, values, count, offset)
        if skipped:
            end, offset = skipped[0], offset - skipped[1]
    statement = _page_statement(
        dialect_name(session), filters, start=start is not None, end=end is not None, after=after is not None
    )
    after_at, after_id = after or (None, None)
    bounds = {"start": start, "end": end, "after_at": after_at, "after_id": after_id}
    rows = connection.execute(statement, values | bounds | {"offset": offset, "limit": limit + 1}).all()
    next_cursor = _encode_cursor(*rows[limit - 1][1:]) if len(rows) > limit else None
    return LogPage(entries=[row[0] for row in rows[:limit]], total=count.total, next_cursor=next_cursor)


def _filter_values(org_id: str, query: LogQuery) -> dict[str, Any]:
    """The bind values of the query's organization and of the optional filters it gives."""
    given = {name: getattr(query, name) for name in OPTIONAL_FILTERS}
    return {"org_id": org_id} | {name: value for name, value in given.items() if value}


def _matching(table: FromClause, filters: tuple[str, ...]) -> list[ColumnElement[bool]]:
    """The organization and `filters` on the log or on its counts, as bind parameters of their names."""
    matches = [table.c.org_id == bindparam("org_id")]
    for name in filters:
        column = table.c[name]
        given = column.in_(bindparam(name, expanding=True)) if name == "status" else column == bindparam(name)
        matches.append(given)
    return matches


def instant(name: str) -> BindParameter[datetime]:
    """A bound instant, typed as the tables' timestamps are (a bare one reaches SQLite in another format)."""
    return bindparam(name, type_=UTCDateTime())


def _between(low: str | None, high: str | None) -> list[ColumnElement[bool]]:
    """Log rows from the bound instant named `low` (inclusive) to the one named `high` (exclusive)."""
    bounds = []
    if low:
        bounds.append(LOG.c.created_at >= instant(low))
    if high:
        bounds.append(LOG.c.created_at < instant(high))
    return bounds


def _whole_hours(filters: tuple[str, ...], *, bottom: bool, top: bool) -> list[ColumnElement[bool]]:
    """The hourly counts of the hours from `bottom` up to `top`, when the range has them."""
    hours = _matching(COUNTS, filters)
    if bottom:
        hours.append(COUNTS.c.hour >= instant("bottom"))
    if top:
        hours.append(COUNTS.c.hour < instant("top"))
    return hours


@dataclass(frozen=True)
class _LogCount:
    """The matches of a log query: `newest` in the partial hour at the range's end (from `top`),
    `whole` in the whole hours below it, then the rest of `total` in the partial hour at its start
    (below `bottom`). `bounds` holds those of start, end, bottom and top the range has."""

    total: int
    newest: int
    whole: int
    bounds: dict[str, datetime]


def _count_logs(
    connection: Connection, filters: tuple[str, ...], values: dict[str, Any], date_range: DateRange
) -> _LogCount:
    """Count the matches from the hourly counts of the whole hours in range and from the rows of
    the partial hours at its ends, in one statement: the cost follows the length of the range, not
    the number of matches."""
    start, end = date_range.start, date_range.end
    bounds = _hour_bounds(start, end)
    statement = _count_statement(filters, start=start is not None, end=end is not None)
    newest, whole, oldest = connection.execute(statement, values | bounds).one()
    return _LogCount(total=newest + whole + oldest, newest=newest, whole=whole, bounds=bounds)


def _hour_bounds(start: datetime | None, end: datetime | None) -> dict[str, datetime]:
    """The range's ends, and `bottom` and `top`, where the whole hours in it begin and end. With no
    whole hour between, both are the hour boundary in the range or, in a range within one hour,
    its start: all of it is then counted as the partial hour at the end."""
    bounds: dict[str, datetime] = {}
    if end:
        top = _hour_floor(end)
        bounds |= {"end": end, "top": max(top, start) if start else top}
    if start:
        bottom = _hour_ceiling(start)
        bounds |= {"start": start, "bottom": min(bottom, bounds["top"]) if end else bottom}
    return bounds


@functools.cache
def _count_statement(filters: tuple[str, ...], *, start: bool, end: bool) -> Select[tuple[int, int, int]]:
    """(newest, whole, oldest) of a range with the given ends, from the bounds of _hour_bounds."""
    whole = select(func.coalesce(func.sum(COUNTS.c.attempts), 0)).where(
        *_whole_hours(filters, bottom=start, top=end)
    )
    newest = _rows_between(filters, "top", "end") if end else literal_column("0")
    oldest = _rows_between(filters, "start", "bottom") if start else literal_column("0")
    return select(newest, whole.scalar_subquery(), oldest)


def _rows_between(filters: tuple[str, ...], low: str, high: str) -> ScalarSelect[int]:
    """How many log rows match between the bound instants named `low` and `high`."""
    return (
        select(func.count())
        .select_from(LOG)
        .where(*_matching(LOG, filters), *_between(low, high))
        .scalar_subquery()
    )


def _skip_whole_hours(
    connection: Connection, filters: tuple[str, ...], values: dict[str, Any], count: _LogCount, offset: int
) -> tuple[datetime, int] | None:
    """A time before which the page at `offset` starts, and how many newer matches that skips:
    the start of the hour below the one the offset falls in, found from the hourly counts."""
    bottom = count.bounds.get("bottom")
    if offset < count.newest:
        return None
    if offset >= count.newest + count.whole:
        return (bottom, count.newest + count.whole) if bottom else None
    statement = _hour_of_match(filters, bottom=bottom is not None, top="top" in count.bounds)
    hour, newer = connection.execute(statement, values | count.bounds | {"skip": offset - count.newest}).one()
    # Every match from the end of that hour on is newer than the offset: no need to walk them.
    return hour + timedelta(hours=1), count.newest + newer


@functools.cache
def _hour_of_match(filters: tuple[str, ...], *, bottom: bool, top: bool) -> Select[tuple[datetime, int]]:
    """The whole hour holding the match at offset `skip` counted down from `top`, and how many
    matches of the whole hours are newer than that hour."""
    per_hour = (
        select(COUNTS.c.hour, func.sum(COUNTS.c.attempts).label("attempts"))
        .where(*_whole_hours(filters, bottom=bottom, top=top))
        .group_by(COUNTS.c.hour)
        .subquery()
    )
    running = func.sum(per_hour.c.attempts).over(order_by=per_hour.c.hour.desc())
    hours = select(per_hour.c.hour, per_hour.c.attempts, running.label("running")).subquery()
    return (
        select(hours.c.hour, hours.c.running - hours.c.attempts)
        .where(hours.c.running > bindparam("skip"))
        .order_by(hours.c.hour.desc())
        .limit(1)
    )


@functools.cache
def _page_statement(
    dialect: str, filters: tuple[str, ...], *, start: bool, end: bool, after: bool
) -> Select[tuple[str, datetime, str]]:
    """A page's entries (JSON) with the created_at and id a cursor takes, newest first, from
    `offset` and `limit` matches, between `start` and `end` and below (`after_at`, `after_id`)."""
    ids = select(LOG.c.id).where(
        *_matching(LOG, filters), *_between("start" if start else None, "end" if end else None)
    )
    if after:
        ids = ids.where(
            tuple_(LOG.c.created_at, LOG.c.id) < tuple_(instant("after_at"), bindparam("after_id"))
        )
    ids = ids.order_by(*NEWEST_FIRST).offset(bindparam("offset")).limit(bindparam("limit"))
    entries = select(_entry_json(dialect), LOG.c.created_at, LOG.c.id).where(LOG.c.id.in_(ids))
    return entries.order_by(*NEWEST_FIRST)


def _entry_json(dialect: str) -> ColumnElement[str]:
    """An entry's JSON as LogEntry writes it, made by the database: a log entry's fields are
    columns of the log by the same names, written under their aliases in the model's order."""
    members: list[ColumnElement[Any]] = []
    for name, field in LogEntry.model_fields.items():
        column = LOG.c[name]
        value = _timestamp_text(dialect, column) if isinstance(column.type, UTCDateTime) else column
        members += [literal_column(f"'{field.alias}'"), value]
    if dialect == "postgresql":
        return cast(func.json_build_object(*members), Text)  # text: the driver would parse json
    return func.json_object(*members, type_=Text)


def _timestamp_text(dialect: str, column: ColumnElement[datetime]) -> ColumnElement[str]:
    """A timestamp as format_timestamp writes it: UTC to the millisecond (cut, not rounded), `Z`."""
    if dialect == "postgresql":
        in_utc = func.timezone(literal_column("'UTC'"), column)
        return func.to_char(in_utc, literal_column("""'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'"""), type_=Text)
    # SQLite keeps UTC timestamps as text in SQLAlchemy's format, `YYYY-MM-DD HH:MM:SS.ffffff`:
    # its first 23 characters are the timestamp to the millisecond.
    to_millisecond = func.substr(column, literal_column("1"), literal_column("23"))
    with_t = func.replace(to_millisecond, literal_column("' '"), literal_column("'T'"), type_=Text)
    return with_t.concat(literal_column("'Z'"))


def _hour_floor(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def _hour_ceiling(moment: datetime) -> datetime:
    floor = _hour_floor(moment)
    return floor if floor == moment else floor + timedelta(hours=1)


def _encode_cursor(created_at: datetime, log_id: str) -> str:
    raw = json.dumps([created_at.isoformat(), log_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        created_at, log_id = json.loads(raw)
        moment = datetime.fromisoformat(created_at)
        if moment.tzinfo is None:
            raise ValueError("naive timestamp")
        return moment, str(log_id)
    except (ValueError, TypeError) as exc:
        raise InvalidCursor from exc


def log_stats(session: Session, *, org_id: str, days: int) -> LogStats:
    """Attempts per UTC day and per channel, by outcome, over the last `days` days (counted in SQL)."""
    first_day = utcnow().date() - timedelta(days=days - 1)
    start = datetime.combine(first_day, time.min, tzinfo=UTC)
    # Both counts read one range of the (org_id, created_at) index. The end bound keeps out a row
    # stamped after today by a process whose clock runs ahead.
    in_period = (
        DeliveryLog.org_id == org_id,
        DeliveryLog.created_at >= start,
        DeliveryLog.created_at < start + timedelta(days=days),
    )
    day = utc_day(session, DeliveryLog.created_at)
    per_day = {first_day + timedelta(days=n): dict.fromkeys(LOG_STATUSES, 0) for n in range(days)}
    by_day = select(day, DeliveryLog.status, func.count()).where(*in_period).group_by(day, DeliveryLog.status)
    for day_text, status, count in session.execute(by_day):
        per_day[date.fromisoformat(day_text)][status] = count
    channel = (DeliveryLog.channel_id, DeliveryLog.channel_name, DeliveryLog.channel_kind)
    per_channel: dict[tuple[str, str, str], dict[str, int]] = {}
    by_channel = (
        select(*channel, DeliveryLog.status, func.count())
        .where(*in_period)
        .group_by(*channel, DeliveryLog.status)
    )
    for channel_id, name, kind, status, count in session.execute(by_channel):
        per_channel.setdefault((channel_id, name, kind), dict.fromkeys(LOG_STATUSES, 0))[status] = count
    return LogStats(
        days=days,
        start=start,
        per_day=[DayCounts(day=d, **counts) for d, counts in per_day.items()],
        per_channel=sorted(
            (_channel_counts(*channel_key, counts) for channel_key, counts in per_channel.items()),
            key=lambda c: (-(c.sent + c.failed + c.dead), c.channel_name),
        ),
    )


def _channel_counts(channel_id: str, name: str, kind: str, counts: dict[str, int]) -> ChannelCounts:
    attempts = sum(counts.values())
    return ChannelCounts(
        channel_id=channel_id,
        channel_name=name,
        channel_kind=kind,
        failure_rate=(counts["failed"] + counts["dead"]) / attempts,
        **counts,
    )


def rotate_channel_secrets(session: Session, *, cipher: Cipher) -> int:
    """Re-encrypt every signing secret (a rotated-out one still signing too) and Slack URL under
    the first configured key."""
    current = reencrypt_column(session, cipher=cipher, column=Channel.secret_encrypted)
    return current + reencrypt_column(session, cipher=cipher, column=Channel.previous_secret_encrypted)

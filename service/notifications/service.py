"""Notification channels, subscriptions and the delivery log (the sending is in delivery.py)."""

from __future__ import annotations

import base64
import binascii
import json
import secrets
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import ColumnElement, ScalarSelect, delete, func, literal, literal_column, select, tuple_
from sqlalchemy.orm import InstrumentedAttribute, Session

from api.notifications import (
    LOG_STATUSES,
    ChannelConfig,
    ChannelCounts,
    DayCounts,
    LogEntry,
    LogQuery,
    LogStats,
)
from service.crypto import Cipher, reencrypt_column
from service.db import dialect_name, insert_unless_taken, utcnow
from service.errors import AlreadyExists, InvalidInput, NotFound
from service.events.service import record_event
from service.notifications.models import (
    Channel,
    Delivery,
    DeliveryLog,
    DeliveryLogCount,
    Subscription,
)
from service.outbound import OutboundRefused, check_url_syntax

SIGNING_SECRET_PREFIX = "whsec_"  # noqa: S105 - the prefix, not a secret
SIGNING_SECRET_BYTES = 24


@dataclass(frozen=True)
class CreatedChannel:
    record: Channel
    signing_secret: str | None


def create_channel(
    session: Session, *, org_id: str, name: str, kind: str, config: ChannelConfig, cipher: Cipher
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


def _channel_config(kind: str, config: ChannelConfig) -> tuple[dict[str, Any], str | None, str | None]:
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
    signing_secret = (
        SIGNING_SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SIGNING_SECRET_BYTES)).decode()
    )
    return {"url": config.url}, signing_secret, signing_secret


def signing_key(signing_secret: str) -> bytes:
    """The HMAC key of a `whsec_` secret: its base64-decoded bytes (Standard Webhooks)."""
    try:
        return base64.b64decode(signing_secret.removeprefix(SIGNING_SECRET_PREFIX), validate=True)
    except binascii.Error as exc:
        raise ValueError("not a whsec_ signing secret") from exc


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


def send_test(session: Session, *, org_id: str, channel_id: str, event_type: str) -> Delivery:
    """Record a test event addressed to this channel alone and queue its delivery."""
    channel = get_channel(session, org_id=org_id, channel_id=channel_id)
    event = record_event(
        session,
        org_id=org_id,
        type=event_type,
        payload={"test": True, "message": f"A test notification for the channel '{channel.name}'."},
    )
    # Fanned out here, to this channel only: subscribers of the event type must not receive it.
    event.fanned_out_at = utcnow()
    delivery = Delivery(org_id=org_id, event_id=event.id, channel_id=channel.id)
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


# A log entry's fields are columns of the log by the same names.
LOG_ENTRY_COLUMNS = [DeliveryLog.__table__.c[name] for name in LogEntry.model_fields]


@dataclass(frozen=True)
class LogPage:
    entries: list[LogEntry]
    total: int
    next_cursor: str | None


def list_logs(session: Session, *, org_id: str, query: LogQuery) -> LogPage:
    """Delivery attempts, newest first: a page by offset (the spec's paging) or after a cursor.

    The hourly counts (DeliveryLogCount) give `total` and let a deep offset start in the hour
    that holds it; the page's ids then come from an index alone and only their rows are read.
    """
    matches = _matching(DeliveryLog, org_id, query)
    count = _count_logs(session, org_id=org_id, query=query, matches=matches)
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
        skipped = _skip_whole_hours(session, count, offset)
        if skipped:
            end, offset = skipped[0], offset - skipped[1]
    ids = select(DeliveryLog.id).where(*matches, *_between(start, end))
    if after:
        ids = ids.where(tuple_(DeliveryLog.created_at, DeliveryLog.id) < after)
    newest_first = (DeliveryLog.created_at.desc(), DeliveryLog.id.desc())
    ids = ids.order_by(*newest_first).offset(offset).limit(limit + 1)
    page = select(*LOG_ENTRY_COLUMNS).where(DeliveryLog.id.in_(ids)).order_by(*newest_first)
    # Plain rows, not ORM objects: a page is only read and answered, and rows load faster.
    entries = [LogEntry.model_validate(row._asdict()) for row in session.execute(page)]
    next_cursor = _encode_cursor(entries[limit - 1]) if len(entries) > limit else None
    return LogPage(entries=entries[:limit], total=count.total, next_cursor=next_cursor)


def _matching(
    table: type[DeliveryLog] | type[DeliveryLogCount], org_id: str, query: LogQuery
) -> list[ColumnElement[bool]]:
    """The query's filters other than time, on the log or on its counts (same column names)."""
    filters = [table.org_id == org_id]
    if query.event_type:
        filters.append(table.event_type == query.event_type)
    if query.channel_id:
        filters.append(table.channel_id == query.channel_id)
    if query.status:
        filters.append(table.status.in_(query.status))
    return filters


def _between(start: datetime | None, end: datetime | None) -> list[ColumnElement[bool]]:
    bounds = []
    if start:
        bounds.append(DeliveryLog.created_at >= start)
    if end:
        bounds.append(DeliveryLog.created_at < end)
    return bounds


@dataclass(frozen=True)
class _LogCount:
    """The matches of a log query: `newest` in the partial hour at the range's end (from `top`),
    `whole` in the whole hours below it (`hours` selects their counts; None when there are none),
    then the rest of `total` in the partial hour at its start (from `bottom`)."""

    total: int
    newest: int = 0
    whole: int = 0
    top: datetime | None = None
    bottom: datetime | None = None
    hours: list[ColumnElement[bool]] | None = None


def _count_logs(
    session: Session, *, org_id: str, query: LogQuery, matches: list[ColumnElement[bool]]
) -> _LogCount:
    """Count the matches (`matches`: the query's filters on the log) from the hourly counts of
    the whole hours in range and from the rows of the partial hours at its ends, in one
    statement: the cost follows the length of the range, not the number of matches."""
    start, end = query.date_range.start, query.date_range.end
    bottom = _hour_ceiling(start) if start else None
    top = _hour_floor(end) if end else None

    def rows_between(low: datetime | None, high: datetime | None) -> ScalarSelect[int]:
        return select(func.count()).where(*matches, *_between(low, high)).scalar_subquery()

    if bottom and top and bottom >= top:
        return _LogCount(total=session.scalar(select(rows_between(start, end))) or 0)  # no whole hour
    hours = _matching(DeliveryLogCount, org_id, query)
    if bottom:
        hours.append(DeliveryLogCount.hour >= bottom)
    if top:
        hours.append(DeliveryLogCount.hour < top)
    whole = select(func.coalesce(func.sum(DeliveryLogCount.attempts), 0)).where(*hours).scalar_subquery()
    newest = rows_between(top, end) if end and top and top < end else literal(0)
    oldest = rows_between(start, bottom) if start and bottom and start < bottom else literal(0)
    counted = session.execute(select(newest, whole, oldest)).one()
    return _LogCount(
        total=sum(counted), newest=counted[0], whole=counted[1], top=top, bottom=bottom, hours=hours
    )


def _skip_whole_hours(session: Session, count: _LogCount, offset: int) -> tuple[datetime, int] | None:
    """A time before which the page at `offset` starts, and how many newer matches that skips:
    the start of the hour below the one the offset falls in, found from the hourly counts."""
    if count.hours is None or offset < count.newest:
        return None
    if offset >= count.newest + count.whole:
        return (count.bottom, count.newest + count.whole) if count.bottom else None
    per_hour = (
        select(DeliveryLogCount.hour, func.sum(DeliveryLogCount.attempts).label("attempts"))
        .where(*count.hours)
        .group_by(DeliveryLogCount.hour)
        .subquery()
    )
    running = func.sum(per_hour.c.attempts).over(order_by=per_hour.c.hour.desc())
    hours = select(per_hour.c.hour, per_hour.c.attempts, running.label("running")).subquery()
    first_past = (
        select(hours.c.hour, hours.c.running - hours.c.attempts)
        .where(hours.c.running > offset - count.newest)
        .order_by(hours.c.hour.desc())
        .limit(1)
    )
    hour, newer = session.execute(first_past).one()
    # Every match from the end of that hour on is newer than the offset: no need to walk them.
    return hour + timedelta(hours=1), count.newest + newer


def _hour_floor(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def _hour_ceiling(moment: datetime) -> datetime:
    floor = _hour_floor(moment)
    return floor if floor == moment else floor + timedelta(hours=1)


def _encode_cursor(entry: LogEntry) -> str:
    raw = json.dumps([entry.created_at.isoformat(), entry.id]).encode()
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
        raise InvalidInput("cursor is not a nextCursor this service returned", field="cursor") from exc


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
    day = _utc_day(session, DeliveryLog.created_at)
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


def _utc_day(session: Session, column: InstrumentedAttribute[datetime]) -> ColumnElement[str]:
    """`YYYY-MM-DD` of a timestamp in UTC, in the database's own dialect.

    The constants are inlined, not bound, so that the GROUP BY repeats the SELECT's expression
    exactly (PostgreSQL compares the two texts, and two bound parameters never match).
    """
    if dialect_name(session) == "postgresql":
        in_utc = func.timezone(literal_column("'UTC'"), column)
        return func.to_char(in_utc, literal_column("'YYYY-MM-DD'"))
    # SQLite keeps UTC timestamps as ISO 8601 text.
    return func.strftime(literal_column("'%Y-%m-%d'"), column)


def rotate_channel_secrets(session: Session, *, cipher: Cipher) -> int:
    """Re-encrypt every signing secret and Slack URL under the first configured key."""
    return reencrypt_column(session, cipher=cipher, column=Channel.secret_encrypted)

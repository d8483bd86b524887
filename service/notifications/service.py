"""Notification channels, subscriptions and the delivery log (the sending is in delivery.py)."""

from __future__ import annotations

import base64
import binascii
import json
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import delete, func, or_, select
from sqlalchemy.orm import Session

from api.notifications import ChannelConfig, LogQuery
from service.crypto import Cipher, reencrypt_column
from service.db import insert_unless_taken, utcnow
from service.errors import AlreadyExists, InvalidInput, NotFound
from service.events.service import record_event
from service.notifications.models import Channel, Delivery, DeliveryLog, Subscription
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


@dataclass(frozen=True)
class LogPage:
    entries: list[DeliveryLog]
    total: int
    next_cursor: str | None


def list_logs(session: Session, *, org_id: str, query: LogQuery) -> LogPage:
    """Delivery attempts, newest first: a page by offset (the spec's paging) or after a cursor."""
    filters = [DeliveryLog.org_id == org_id]
    if query.event_type:
        filters.append(DeliveryLog.event_type == query.event_type)
    if query.channel_id:
        filters.append(DeliveryLog.channel_id == query.channel_id)
    if query.status:
        filters.append(DeliveryLog.status.in_(query.status))
    if query.date_range.start:
        filters.append(DeliveryLog.created_at >= query.date_range.start)
    if query.date_range.end:
        filters.append(DeliveryLog.created_at < query.date_range.end)
    total = session.scalar(select(func.count()).select_from(DeliveryLog).where(*filters)) or 0
    page = select(DeliveryLog).where(*filters)
    if query.cursor:
        created_at, log_id = _decode_cursor(query.cursor)
        page = page.where(
            or_(
                DeliveryLog.created_at < created_at,
                (DeliveryLog.created_at == created_at) & (DeliveryLog.id < log_id),
            )
        )
    limit = query.pagination.limit
    rows = list(
        session.scalars(
            page.order_by(DeliveryLog.created_at.desc(), DeliveryLog.id.desc())
            .offset(query.pagination.offset)
            .limit(limit + 1)
        )
    )
    next_cursor = _encode_cursor(rows[limit - 1]) if len(rows) > limit else None
    return LogPage(entries=rows[:limit], total=total, next_cursor=next_cursor)


def _encode_cursor(entry: DeliveryLog) -> str:
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


def rotate_channel_secrets(session: Session, *, cipher: Cipher) -> int:
    """Re-encrypt every signing secret and Slack URL under the first configured key."""
    return reencrypt_column(session, cipher=cipher, column=Channel.secret_encrypted)

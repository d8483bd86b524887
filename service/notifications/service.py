"""Notification channels and their subscriptions.

Deliveries (list, detail, resend, recover) are in deliveries.py, the delivery log and its counts in
logs.py, what is sent in messages.py, the queue the workers work from in queue.py, the sending in
sender.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import (
    ColumnElement,
    delete,
    or_,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from api.common import format_timestamp
from api.notifications import (
    ChannelConfigInput,
    ChannelTestRequest,
    CreateChannel,
    Subscribe,
    Unsubscribe,
    UpdateChannel,
)
from service.errors import AlreadyExists, InvalidInput, NotFound
from service.events.service import record_event
from service.notifications.models import (
    ChannelRow,
    DeliveryRow,
    SubscriptionRow,
)
from service.outbound.urls import OutboundRefused, check_url_syntax
from service.outbound.webhooks import new_secret
from service.storage.crypto import Cipher, reencrypt_column
from service.storage.db import insert_unless_taken, utcnow

# States a disabled channel holds instead of sending.
WAITING = ("pending", "failed")


@dataclass(frozen=True)
class CreatedChannel:
    record: ChannelRow
    signing_secret: str | None


def create_channel(
    session: Session, *, org_id: str, request: CreateChannel, cipher: Cipher
) -> CreatedChannel:
    """Create a channel; a webhook channel gets a signing secret, returned here and never again."""
    name = request.name
    shown, secret, signing_secret = _channel_config(request.kind, request.config)
    record = ChannelRow(
        org_id=org_id,
        name=name,
        kind=request.kind,
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


def list_channels(session: Session, *, org_id: str) -> list[ChannelRow]:
    query = (
        select(ChannelRow).where(ChannelRow.org_id == org_id).order_by(ChannelRow.created_at, ChannelRow.id)
    )
    return list(session.scalars(query))


def get_channel(session: Session, *, org_id: str, channel_id: str) -> ChannelRow:
    channel = session.scalar(
        select(ChannelRow).where(ChannelRow.id == channel_id, ChannelRow.org_id == org_id)
    )
    if channel is None:
        raise NotFound(f"No notification channel '{channel_id}' in this organization", field="channelId")
    return channel


def delete_channel(session: Session, *, org_id: str, channel_id: str) -> ChannelRow:
    """Delete a channel, its subscriptions and its undelivered deliveries; its logs stay."""
    channel = get_channel(session, org_id=org_id, channel_id=channel_id)
    # Explicit deletes, not only ON DELETE CASCADE: SQLite enforces it only with foreign keys on.
    session.execute(delete(SubscriptionRow).where(SubscriptionRow.channel_id == channel.id))
    session.execute(delete(DeliveryRow).where(DeliveryRow.channel_id == channel.id))
    session.delete(channel)
    session.flush()
    return channel


def update_channel(
    session: Session, *, org_id: str, channel_id: str, request: UpdateChannel, actor: str, cipher: Cipher
) -> ChannelRow:
    """Rename a channel, give it a new address of its kind, enable or disable it."""
    channel = get_channel(session, org_id=org_id, channel_id=channel_id)
    now = utcnow()
    if request.config is not None:
        shown, secret, _ = _channel_config(channel.kind, request.config)
        channel.config = shown
        if channel.kind == "slack" and not cipher.holds(channel.secret_encrypted, secret or ""):
            channel.secret_encrypted = cipher.encrypt(secret or "")
    if request.name is not None and request.name != channel.name:
        _rename(session, channel, request.name)
    if request.enabled is False:
        disable_channel(
            session, channel_id=channel.id, now=now, reason=f"Disabled by {actor} on {format_timestamp(now)}"
        )
    elif request.enabled is True:
        # Its held deliveries stay held: recovering them is the operator's choice.
        channel.disabled_at = channel.disabled_reason = None
    session.flush()
    return channel


def _rename(session: Session, channel: ChannelRow, name: str) -> None:
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
    channel = session.get(ChannelRow, channel_id)
    if channel is None or channel.disabled_at is not None:
        return
    channel.disabled_at, channel.disabled_reason = now, reason
    session.execute(
        update(DeliveryRow)
        .where(DeliveryRow.channel_id == channel_id, DeliveryRow.status.in_(WAITING), not_in_flight(now))
        .values(status="held", next_attempt_at=None)
    )


def not_in_flight(now: datetime) -> ColumnElement[bool]:
    """No worker is making an attempt of the delivery now (a lease it stopped renewing has ended)."""
    return or_(DeliveryRow.lease_expires_at.is_(None), DeliveryRow.lease_expires_at < now)


def rotate_secret(
    session: Session, *, org_id: str, channel_id: str, cipher: Cipher, grace_seconds: float
) -> tuple[ChannelRow, str]:
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


def refuse_disabled(channel: ChannelRow, action: str) -> None:
    if channel.disabled_at is not None:
        raise InvalidInput(
            f"The channel '{channel.name}' is disabled ({channel.disabled_reason}); enable it to {action}",
            field="channelId",
            code="channel_disabled",
        )


def send_test(session: Session, *, org_id: str, channel_id: str, request: ChannelTestRequest) -> DeliveryRow:
    """Record a test event addressed to this channel alone and queue its delivery."""
    event_type = request.event_type
    channel = get_channel(session, org_id=org_id, channel_id=channel_id)
    refuse_disabled(channel, "send a test")
    event = record_event(
        session,
        org_id=org_id,
        type=event_type,
        payload={"test": True, "message": f"A test notification for the channel '{channel.name}'."},
    )
    # Fanned out here, to this channel only: subscribers of the event type must not receive it.
    event.fanned_out_at = now = utcnow()
    delivery = DeliveryRow(
        org_id=org_id, event_id=event.id, event_type=event.type, channel_id=channel.id, next_attempt_at=now
    )
    session.add(delivery)
    session.flush()
    return delivery


def subscribe(session: Session, *, org_id: str, request: Subscribe) -> SubscriptionRow:
    """Subscribe a channel to an event type; subscribing again sets `enabled`."""
    event_type, enabled = request.event_type, request.enabled
    channel = get_channel(session, org_id=org_id, channel_id=request.channel_id)
    existing = _subscription(session, channel_id=channel.id, event_type=event_type)
    if existing is None:
        candidate = SubscriptionRow(
            org_id=org_id, channel_id=channel.id, event_type=event_type, enabled=enabled
        )
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


def unsubscribe(session: Session, *, org_id: str, request: Unsubscribe) -> SubscriptionRow:
    event_type = request.event_type
    channel = get_channel(session, org_id=org_id, channel_id=request.channel_id)
    existing = _subscription(session, channel_id=channel.id, event_type=event_type)
    if existing is None:
        raise NotFound(f"The channel is not subscribed to '{event_type}'", field="eventType")
    session.delete(existing)
    session.flush()
    return existing


def _subscription(session: Session, *, channel_id: str, event_type: str) -> SubscriptionRow | None:
    query = select(SubscriptionRow).where(
        SubscriptionRow.channel_id == channel_id, SubscriptionRow.event_type == event_type
    )
    return session.scalar(query)


def list_subscriptions(session: Session, *, org_id: str, channel_id: str | None) -> list[SubscriptionRow]:
    query = select(SubscriptionRow).where(SubscriptionRow.org_id == org_id)
    if channel_id is not None:
        query = query.where(SubscriptionRow.channel_id == channel_id)
    return list(session.scalars(query.order_by(SubscriptionRow.channel_id, SubscriptionRow.event_type)))


def rotate_channel_secrets(session: Session, *, cipher: Cipher) -> int:
    """Re-encrypt every signing secret (a rotated-out one still signing too) and Slack URL under
    the first configured key."""
    current = reencrypt_column(session, cipher=cipher, column=ChannelRow.secret_encrypted)
    return current + reencrypt_column(session, cipher=cipher, column=ChannelRow.previous_secret_encrypted)

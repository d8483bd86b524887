"""The delivery queue in the database: events fanned out into deliveries, and due deliveries
claimed under a lease (each attempt's outcome is recorded by outcomes.py).

Plain functions over a Session; the sender runs them, several at a time, in one short transaction.
Their statements are built once and run on the session's connection with bound values: at a
thousand deliveries a second, building and compiling statements would cost more than running them.
Claims are atomic: PostgreSQL skips the rows another worker is claiming (`FOR UPDATE SKIP LOCKED`),
SQLite lets one writer in at a time (`BEGIN IMMEDIATE`). An outcome is recorded only while its
lease is still the claimer's own. A delivery whose lease ran out was held by a worker that stopped
before recording its attempt (in flight, or claimed and about to start): the next claim logs that
attempt as failed, saying its outcome is unknown, then sends it again. At least once, none lost.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Row, Select, bindparam, insert, literal, or_, select, update
from sqlalchemy.orm import Session

from service.events.models import EventRow
from service.notifications.logs import instant
from service.notifications.messages import Message
from service.notifications.models import ChannelRow, DeliveryLogRow, DeliveryRow, SubscriptionRow
from service.observability import metrics
from service.orgs.models import OrganizationRow
from service.settings import Settings
from service.storage.crypto import Cipher, DecryptionFailed
from service.storage.ids import new_id

FAN_OUT_BATCH = 500
DUE_STATUSES = ("pending", "failed")
STOPPED = (
    "The worker stopped before this attempt's outcome was recorded, so whether it reached the "
    "receiver is unknown; the message is sent again"
)
UNDECRYPTABLE = (
    "The channel's secret cannot be decrypted with the configured encryption keys; "
    "add the key it was written with to ORGDECK_ENCRYPTION_KEYS"
)


@dataclass(frozen=True)
class Claim:
    """A delivery this worker holds, with everything needed to send it outside a transaction."""

    delivery_id: str
    org_id: str
    lease_token: str
    attempt: int
    schedule_from: int
    channel_id: str
    channel_name: str
    message: Message
    # Webhooks: the signing secrets (the previous one too during a rotation). Slack: the URL.
    secrets: tuple[str, ...]
    # Why the channel cannot be sent to this round (its secret no configured key opens).
    unsendable: str | None = None
    # The traceparent of what recorded the event: the attempt is a span of that trace.
    trace_context: str | None = None


# -- fan-out ------------------------------------------------------------------------------------


EVENTS = EventRow.__table__
DELIVERIES = DeliveryRow.__table__
LOGS = DeliveryLogRow.__table__
CHANNELS = ChannelRow.__table__
NEW_EVENT = select(literal(1)).where(EVENTS.c.fanned_out_at.is_(None)).limit(1)
NEW_EVENTS = (
    select(EVENTS.c.id, EVENTS.c.org_id, EVENTS.c.type)
    .where(EVENTS.c.fanned_out_at.is_(None))
    .order_by(EVENTS.c.occurred_at)
    .limit(FAN_OUT_BATCH)
    .with_for_update(skip_locked=True)
)
SUBSCRIBED = (
    select(
        SubscriptionRow.org_id, SubscriptionRow.event_type, SubscriptionRow.channel_id, ChannelRow.disabled_at
    )
    .join(ChannelRow, ChannelRow.id == SubscriptionRow.channel_id)
    .where(
        SubscriptionRow.enabled.is_(True),
        SubscriptionRow.org_id.in_(bindparam("org_ids", expanding=True)),
        SubscriptionRow.event_type.in_(bindparam("types", expanding=True)),
    )
)
FANNED_OUT = (
    update(EVENTS)
    .where(EVENTS.c.id.in_(bindparam("ids", expanding=True)))
    .values(fanned_out_at=instant("now"))
)


def has_new_events(session: Session) -> bool:
    return session.connection().execute(NEW_EVENT).first() is not None


def fan_out(session: Session, *, now: datetime) -> int:
    """Turn a batch of new events into one delivery per enabled subscription; how many events.

    A disabled channel's delivery is made `held`: kept, not sent, until the channel is enabled and
    its deliveries recovered.
    """
    connection = session.connection()
    events = connection.execute(NEW_EVENTS).all()
    if not events:
        return 0
    subscribed: dict[tuple[str, str], list[tuple[str, bool]]] = {}
    found = {"org_ids": list({e.org_id for e in events}), "types": list({e.type for e in events})}
    for org_id, event_type, channel_id, disabled_at in connection.execute(SUBSCRIBED, found):
        subscribed.setdefault((org_id, event_type), []).append((channel_id, disabled_at is not None))
    deliveries = [
        {
            "id": new_id("msg"),
            "org_id": event.org_id,
            "event_id": event.id,
            "event_type": event.type,
            "channel_id": channel_id,
            "status": "held" if disabled else "pending",
            "attempts": 0,
            "schedule_from": 0,
            "next_attempt_at": None if disabled else now,
            "lease_token": None,
            "lease_expires_at": None,
            "created_at": now,
        }
        for event in events
        for channel_id, disabled in subscribed.get((event.org_id, event.type), [])
    ]
    if deliveries:
        connection.execute(insert(DELIVERIES), deliveries)
    connection.execute(FANNED_OUT, {"ids": [e.id for e in events], "now": now})
    return len(events)


# -- claims -------------------------------------------------------------------------------------

_CLAIM_COLUMNS = (
    DeliveryRow.id,
    DeliveryRow.org_id,
    DeliveryRow.attempts,
    DeliveryRow.schedule_from,
    DeliveryRow.lease_token,
    EventRow.id.label("event_id"),
    EventRow.type.label("event_type"),
    EventRow.occurred_at,
    EventRow.payload,
    EventRow.trace_context,
    ChannelRow.id.label("channel_id"),
    ChannelRow.name.label("channel_name"),
    ChannelRow.kind.label("channel_kind"),
    ChannelRow.config.label("channel_config"),
    ChannelRow.secret_encrypted,
    ChannelRow.previous_secret_encrypted,
    ChannelRow.previous_secret_expires_at,
    OrganizationRow.slug.label("org_slug"),
)


def _due(status: str) -> list[Any]:
    """Deliveries in `status` due at `now` and not held by a live lease, outside the `busy` channels."""
    return [
        DELIVERIES.c.status == status,
        DELIVERIES.c.next_attempt_at <= instant("now"),
        or_(DELIVERIES.c.lease_expires_at.is_(None), DELIVERIES.c.lease_expires_at < instant("now")),
        DELIVERIES.c.channel_id.not_in(bindparam("busy", expanding=True)),
    ]


@functools.cache
def _any_due(status: str) -> Select[tuple[int]]:
    return select(literal(1)).select_from(DELIVERIES).where(*_due(status)).limit(1)


@functools.cache
def _candidates(status: str) -> Select[Any]:
    """Due deliveries in `status` of enabled channels, oldest due first, up to `limit`: only what
    choosing among them needs, since most of a busy queue's candidates are left for later."""
    return (
        select(DELIVERIES.c.id, DELIVERIES.c.channel_id, DELIVERIES.c.next_attempt_at)
        .join(CHANNELS, CHANNELS.c.id == DELIVERIES.c.channel_id)
        .where(*_due(status), CHANNELS.c.disabled_at.is_(None))
        .order_by(DELIVERIES.c.next_attempt_at)
        .limit(bindparam("limit"))
    )


CLAIMED = (
    select(*_CLAIM_COLUMNS)
    .join(EventRow, EventRow.id == DeliveryRow.event_id)
    .join(ChannelRow, ChannelRow.id == DeliveryRow.channel_id)
    .join(OrganizationRow, OrganizationRow.id == DeliveryRow.org_id)
    .where(
        DeliveryRow.id.in_(bindparam("ids", expanding=True)),
        DeliveryRow.status.in_(DUE_STATUSES),
        or_(DeliveryRow.lease_expires_at.is_(None), DeliveryRow.lease_expires_at < instant("now")),
    )
    # Another worker may have claimed some since they were read: those are skipped.
    .with_for_update(of=DeliveryRow, skip_locked=True)
)


LEASED = (
    update(DELIVERIES)
    .where(DELIVERIES.c.id.in_(bindparam("ids", expanding=True)))
    .values(lease_token=bindparam("token"), lease_expires_at=instant("until"))
)


def has_due(session: Session, *, now: datetime, busy: Iterable[str]) -> bool:
    values = {"now": now, "busy": list(busy)}
    connection = session.connection()
    return any(connection.execute(_any_due(status), values).first() for status in DUE_STATUSES)


def claim_due(
    session: Session,
    settings: Settings,
    cipher: Cipher,
    *,
    now: datetime,
    room: Mapping[str, int],
    fresh_room: int,
    limit: int,
    busy: Iterable[str],
) -> list[Claim]:
    """Claim up to `limit` due deliveries, oldest due first, at most `room[channel]` (or
    `fresh_room` for a channel not in it) of any one channel, none of the `busy` ones.

    A delivery found under an expired lease was cut short: its attempt is logged as failed here
    (or dead, if it was the schedule's last) and it is claimed to be sent again at once.
    """
    connection = session.connection()
    values = {"now": now, "busy": list(busy), "limit": limit}
    candidates: list[Row[Any]] = []
    for status in DUE_STATUSES:
        candidates += connection.execute(_candidates(status), values).all()
    candidates.sort(key=lambda row: row.next_attempt_at)
    left = dict(room)
    picked = []
    for row in candidates:
        free = left.get(row.channel_id, fresh_room)
        if len(picked) < limit and free > 0:
            left[row.channel_id] = free - 1
            picked.append(row.id)
    if not picked:
        return []
    chosen = connection.execute(CLAIMED, {"ids": picked, "now": now}).all()
    token = new_id("lease")
    claims: list[Claim] = []
    cut_short = [row for row in chosen if row.lease_token is not None]
    if cut_short:
        metrics.LEASE_TAKEOVERS.labels(kind="delivery").inc(len(cut_short))
    given_up = _log_cut_short(session, settings, cut_short, now)
    for row in chosen:
        if row.id in given_up:
            continue
        attempts = row.attempts + (row.lease_token is not None)
        channel_secrets, unsendable = _channel_secrets(row, cipher, now)
        claims.append(
            Claim(
                delivery_id=row.id,
                org_id=row.org_id,
                lease_token=token,
                attempt=attempts + 1,
                schedule_from=row.schedule_from,
                channel_id=row.channel_id,
                channel_name=row.channel_name,
                message=Message(
                    delivery_id=row.id,
                    event_id=row.event_id,
                    event_type=row.event_type,
                    occurred_at=row.occurred_at,
                    org_slug=row.org_slug,
                    payload=row.payload,
                    channel_kind=row.channel_kind,
                    channel_config=row.channel_config,
                ),
                secrets=channel_secrets,
                unsendable=unsendable,
                trace_context=row.trace_context,
            )
        )
    if claims:
        until = now + lease(settings)
        connection.execute(LEASED, {"ids": [c.delivery_id for c in claims], "token": token, "until": until})
    return claims


def lease(settings: Settings) -> timedelta:
    return timedelta(seconds=settings.notification_lease_seconds)


def _log_cut_short(session: Session, settings: Settings, rows: list[Row[Any]], now: datetime) -> set[str]:
    """Log the attempts that workers which stopped left unfinished; the ids of those now dead."""
    if not rows:
        return set()
    updates, logs, dead = [], [], set()
    for row in rows:
        attempt = row.attempts + 1
        spent = attempt - row.schedule_from >= len(settings.notification_retry_schedule)
        status = "dead" if spent else "failed"
        if spent:
            dead.add(row.id)
        updates.append(
            {
                "row_id": row.id,
                "attempts": attempt,
                "status": status,
                "next_attempt_at": None if spent else now,
                "last_attempt_at": now,
                "last_response_status": None,
                "last_error": STOPPED,
            }
        )
        logs.append(
            log_row(row, event_type=row.event_type, attempt=attempt, status=status, at=now, error=STOPPED)
            | {"delivery_id": row.id, "event_id": row.event_id, "next_attempt_at": None if spent else now}
        )
    update_deliveries(session, updates)
    session.connection().execute(insert(LOGS), logs)
    return dead


def _channel_secrets(row: Row[Any], cipher: Cipher, now: datetime) -> tuple[tuple[str, ...], str | None]:
    """The channel's decrypted secrets, or why they cannot be had: one channel whose key was removed
    too early fails its own deliveries on their schedule instead of stopping every other one."""
    encrypted = [row.secret_encrypted]
    if row.previous_secret_expires_at and row.previous_secret_expires_at > now:
        encrypted.append(row.previous_secret_encrypted)
    try:
        return tuple(_decrypted(cipher, value) for value in encrypted if value), None
    except DecryptionFailed:
        return (), UNDECRYPTABLE


@functools.lru_cache(maxsize=4096)
def _decrypted(cipher: Cipher, ciphertext: str) -> str:
    """A channel's secret, decrypted once per worker rather than once per delivery."""
    return cipher.decrypt(ciphertext)


RENEWED = (
    update(DELIVERIES)
    .where(DELIVERIES.c.lease_token.in_(bindparam("tokens", expanding=True)))
    .values(lease_expires_at=instant("until"))
)


def renew_leases(session: Session, settings: Settings, tokens: Iterable[str], *, now: datetime) -> None:
    """Extend the leases of the deliveries claimed under `tokens` that are still being sent."""
    tokens = list(tokens)
    if tokens:
        session.connection().execute(RENEWED, {"tokens": tokens, "until": now + lease(settings)})


RELEASED = (
    update(DELIVERIES)
    .where(DELIVERIES.c.id == bindparam("row_id"), DELIVERIES.c.lease_token == bindparam("token"))
    .values(lease_token=None, lease_expires_at=None)
)


def release(session: Session, claims: Iterable[Claim]) -> None:
    """Give back claims never attempted: no attempt to log, due again at once for any worker."""
    rows = [{"row_id": claim.delivery_id, "token": claim.lease_token} for claim in claims]
    if rows:
        session.connection().execute(RELEASED, rows)


def log_row(
    channel: Any, *, event_type: str, attempt: int, status: str, at: datetime, error: str | None
) -> dict[str, Any]:
    """A log row with no answer in it; `channel` carries the org, the channel's id, name and kind."""
    kind = channel.message.channel_kind if isinstance(channel, Claim) else channel.channel_kind
    return {
        "id": new_id("log"),
        "org_id": channel.org_id,
        "event_type": event_type,
        "channel_id": channel.channel_id,
        "channel_name": channel.channel_name,
        "channel_kind": kind,
        "attempt": attempt,
        "status": status,
        "response_status": None,
        "latency_ms": None,
        "error": error,
        "created_at": at,
        "request_headers": None,
        "response_headers": None,
        "response_body": None,
    }


# Every column an attempt sets on its delivery; bound names apart from the columns' (SQLAlchemy
# keeps those for itself).
_MOVED = ("attempts", "status", "next_attempt_at", "last_attempt_at", "last_response_status", "last_error")
MOVED_ON = (
    update(DELIVERIES)
    .where(DELIVERIES.c.id == bindparam("row_id"))
    .values(
        {name: bindparam(f"new_{name}") for name in _MOVED} | {"lease_token": None, "lease_expires_at": None}
    )
)


def update_deliveries(session: Session, updates: list[dict[str, Any]]) -> None:
    """Set each delivery's state to its row's, releasing its lease, in one statement for every row."""
    if updates:
        rows = [{"row_id": row["row_id"], **{f"new_{name}": row[name] for name in _MOVED}} for row in updates]
        session.connection().execute(MOVED_ON, rows)

"""The delivery queue in the database: events fanned out into deliveries, due deliveries claimed
under a lease, and each attempt's outcome recorded with the delivery's next state.

Plain functions over a Session; the sender runs them, several at a time, in one short transaction.
Claims are atomic: PostgreSQL skips the rows another worker is claiming (`FOR UPDATE SKIP LOCKED`),
SQLite lets one writer in at a time (`BEGIN IMMEDIATE`). An outcome is recorded only while its
lease is still the claimer's own. A delivery whose lease ran out was cut short by a worker that
stopped: the next claim logs that attempt as failed, then sends it again. At least once, none lost.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Row, and_, bindparam, insert, literal, or_, select, update
from sqlalchemy.orm import Session

from api.common import format_timestamp
from service.crypto import Cipher, DecryptionFailed
from service.events.models import Event
from service.ids import new_id
from service.notifications.messages import Message
from service.notifications.models import Channel, Delivery, DeliveryLog, Subscription
from service.notifications.service import disable_channel
from service.orgs.models import Organization
from service.settings import Settings

FAN_OUT_BATCH = 500
# A receiver asking for more than a day is answered on the schedule's terms instead.
MAX_RETRY_AFTER_SECONDS = 24 * 3600
JITTER = 0.1
ERROR_MAX_CHARS = 300
DUE_STATUSES = ("pending", "failed")
STOPPED = (
    "The worker stopped during this attempt, so whether it arrived is unknown; the message is sent again"
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


@dataclass(frozen=True)
class Outcome:
    """What one attempt got: an answer (any status), or an error before or instead of one."""

    delivered: bool
    response_status: int | None = None
    latency_ms: int | None = None
    error: str | None = None
    retry_after: float | None = None
    gone: bool = False
    # The address is one the service will not call: retrying cannot help.
    refused: bool = False
    # No answer at all: the receiver could not be reached or did not answer in time.
    unanswered: bool = False
    request_headers: Mapping[str, str] = field(default_factory=dict)
    response_headers: Mapping[str, str] = field(default_factory=dict)
    response_body: str | None = None


@dataclass(frozen=True)
class Attempt:
    claim: Claim
    outcome: Outcome
    at: datetime


# -- fan-out ------------------------------------------------------------------------------------


def has_new_events(session: Session) -> bool:
    return session.scalar(select(literal(1)).where(Event.fanned_out_at.is_(None)).limit(1)) is not None


def fan_out(session: Session, *, now: datetime) -> int:
    """Turn a batch of new events into one delivery per enabled subscription; how many events.

    A disabled channel's delivery is made `held`: kept, not sent, until the channel is enabled and
    its deliveries recovered.
    """
    events = session.execute(
        select(Event.id, Event.org_id, Event.type)
        .where(Event.fanned_out_at.is_(None))
        .order_by(Event.occurred_at)
        .limit(FAN_OUT_BATCH)
        .with_for_update(skip_locked=True)
    ).all()
    if not events:
        return 0
    subscribed: dict[tuple[str, str], list[tuple[str, bool]]] = {}
    subscriptions = (
        select(Subscription.org_id, Subscription.event_type, Subscription.channel_id, Channel.disabled_at)
        .join(Channel, Channel.id == Subscription.channel_id)
        .where(
            Subscription.enabled.is_(True),
            Subscription.org_id.in_({event.org_id for event in events}),
            Subscription.event_type.in_({event.type for event in events}),
        )
    )
    for org_id, event_type, channel_id, disabled_at in session.execute(subscriptions):
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
            "created_at": now,
        }
        for event in events
        for channel_id, disabled in subscribed.get((event.org_id, event.type), [])
    ]
    if deliveries:
        session.execute(insert(Delivery), deliveries)
    session.execute(update(Event).where(Event.id.in_([e.id for e in events])).values(fanned_out_at=now))
    return len(events)


# -- claims -------------------------------------------------------------------------------------

_CLAIM_COLUMNS = (
    Delivery.id,
    Delivery.org_id,
    Delivery.attempts,
    Delivery.schedule_from,
    Delivery.lease_token,
    Delivery.next_attempt_at,
    Delivery.created_at,
    Event.id.label("event_id"),
    Event.type.label("event_type"),
    Event.occurred_at,
    Event.payload,
    Channel.id.label("channel_id"),
    Channel.name.label("channel_name"),
    Channel.kind.label("channel_kind"),
    Channel.config.label("channel_config"),
    Channel.secret_encrypted,
    Channel.previous_secret_encrypted,
    Channel.previous_secret_expires_at,
    Organization.slug.label("org_slug"),
)


def _due(now: datetime, status: str, busy: Iterable[str]) -> Any:
    """Deliveries in `status` due at `now` and not held by a live lease, outside the `busy` channels."""
    conditions = [
        Delivery.status == status,
        Delivery.next_attempt_at <= now,
        or_(Delivery.lease_expires_at.is_(None), Delivery.lease_expires_at < now),
    ]
    busy = list(busy)
    if busy:
        conditions.append(Delivery.channel_id.not_in(busy))
    return and_(*conditions)


def has_due(session: Session, *, now: datetime, busy: Iterable[str]) -> bool:
    busy = list(busy)
    return any(
        session.scalar(select(literal(1)).select_from(Delivery).where(_due(now, status, busy)).limit(1))
        for status in DUE_STATUSES
    )


def claim_due(
    session: Session,
    settings: Settings,
    cipher: Cipher,
    *,
    now: datetime,
    free: Mapping[str, int],
    limit: int,
    busy: Iterable[str],
) -> list[Claim]:
    """Claim up to `limit` due deliveries, oldest due first, at most `free[channel]` (or the
    per-channel cap for a channel not in `free`) of any one channel, none of the `busy` ones.

    A delivery found under an expired lease was cut short: its attempt is logged as failed here
    (or dead, if it was the schedule's last) and it is claimed to be sent again at once.
    """
    busy = list(busy)
    candidates: list[Row[Any]] = []
    for status in DUE_STATUSES:
        query = (
            select(*_CLAIM_COLUMNS)
            .join(Event, Event.id == Delivery.event_id)
            .join(Channel, Channel.id == Delivery.channel_id)
            .join(Organization, Organization.id == Delivery.org_id)
            .where(_due(now, status, busy), Channel.disabled_at.is_(None))
            .order_by(Delivery.next_attempt_at)
            .limit(limit)
            .with_for_update(of=Delivery, skip_locked=True)
        )
        candidates += session.execute(query).all()
    candidates.sort(key=lambda row: row.next_attempt_at)
    room = dict(free)
    chosen = []
    for row in candidates:
        left = room.get(row.channel_id, settings.notification_channel_concurrency)
        if len(chosen) < limit and left > 0:
            room[row.channel_id] = left - 1
            chosen.append(row)
    token = new_id("lease")
    claims: list[Claim] = []
    cut_short = [row for row in chosen if row.lease_token is not None]
    given_up = _log_cut_short(session, settings, cut_short, now)
    secrets_of: dict[str, tuple[tuple[str, ...], str | None]] = {}
    for row in chosen:
        if row.id in given_up:
            continue
        attempts = row.attempts + (row.lease_token is not None)
        if row.channel_id not in secrets_of:
            secrets_of[row.channel_id] = _channel_secrets(row, cipher, now)
        channel_secrets, unsendable = secrets_of[row.channel_id]
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
            )
        )
    if claims:
        session.execute(
            update(Delivery)
            .where(Delivery.id.in_([claim.delivery_id for claim in claims]))
            .values(lease_token=token, lease_expires_at=now + lease(settings))
        )
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
                "lease_token": None,
                "lease_expires_at": None,
            }
        )
        logs.append(
            _log_row(row, event_type=row.event_type, attempt=attempt, status=status, at=now, error=STOPPED)
            | {"delivery_id": row.id, "event_id": row.event_id, "next_attempt_at": None if spent else now}
        )
    _update_deliveries(session, updates)
    session.execute(insert(DeliveryLog), logs)
    return dead


def _channel_secrets(row: Row[Any], cipher: Cipher, now: datetime) -> tuple[tuple[str, ...], str | None]:
    """The channel's decrypted secrets, or why they cannot be had: one channel whose key was removed
    too early fails its own deliveries on their schedule instead of stopping every other one."""
    encrypted = [row.secret_encrypted]
    if row.previous_secret_expires_at and row.previous_secret_expires_at > now:
        encrypted.append(row.previous_secret_encrypted)
    try:
        return tuple(cipher.decrypt(value) for value in encrypted if value), None
    except DecryptionFailed:
        return (), UNDECRYPTABLE


def renew_leases(session: Session, settings: Settings, tokens: Iterable[str], *, now: datetime) -> None:
    """Extend the leases of the deliveries claimed under `tokens` that are still being sent."""
    tokens = list(tokens)
    if tokens:
        session.execute(
            update(Delivery)
            .where(Delivery.lease_token.in_(tokens))
            .values(lease_expires_at=now + lease(settings))
        )


# -- outcomes -----------------------------------------------------------------------------------


def record(session: Session, settings: Settings, attempts: list[Attempt]) -> None:
    """Log each attempt and move its delivery on, for the deliveries whose lease is still ours.

    A failed attempt to a channel disabled meanwhile leaves its delivery `held`; a 410 Gone makes
    it dead and disables the channel, holding the channel's other deliveries.
    """
    if not attempts:
        return
    current = {
        row.id: (row.lease_token, row.disabled_at is not None)
        for row in session.execute(
            select(Delivery.id, Delivery.lease_token, Channel.disabled_at)
            .join(Channel, Channel.id == Delivery.channel_id)
            .where(Delivery.id.in_([done.claim.delivery_id for done in attempts]))
            .with_for_update(of=Delivery)
        )
    }
    updates, logs = [], []
    gone: dict[str, datetime] = {}
    for done in attempts:
        claim, outcome = done.claim, done.outcome
        lease_token, channel_disabled = current.get(claim.delivery_id, (None, False))
        if lease_token != claim.lease_token:
            continue  # the lease expired and another worker took over, or the channel was deleted
        status, next_attempt_at = _next_state(settings, claim, outcome, done.at)
        delivery_status = status
        if status == "failed" and channel_disabled:
            delivery_status, next_attempt_at = "held", None
        if outcome.gone:
            gone[claim.channel_id] = done.at
        error = outcome.error[:ERROR_MAX_CHARS] if outcome.error else None
        updates.append(
            {
                "row_id": claim.delivery_id,
                "attempts": claim.attempt,
                "status": delivery_status,
                "next_attempt_at": next_attempt_at,
                "last_attempt_at": done.at,
                "last_response_status": outcome.response_status,
                "last_error": error,
                "lease_token": None,
                "lease_expires_at": None,
            }
        )
        message = claim.message
        logs.append(
            _log_row(
                claim,
                event_type=message.event_type,
                attempt=claim.attempt,
                status=status,
                at=done.at,
                error=error,
            )
            | {
                "delivery_id": claim.delivery_id,
                "event_id": message.event_id,
                "next_attempt_at": next_attempt_at,
                "response_status": outcome.response_status,
                "latency_ms": outcome.latency_ms,
                "request_headers": dict(outcome.request_headers),
                "response_headers": dict(outcome.response_headers) if outcome.response_status else None,
                "response_body": outcome.response_body,
            }
        )
    _update_deliveries(session, updates)
    if logs:
        session.execute(insert(DeliveryLog), logs)
    for channel_id, at in gone.items():
        disable_channel(
            session,
            channel_id=channel_id,
            now=at,
            reason=f"The endpoint answered 410 Gone on {format_timestamp(at)}; give the channel the "
            "endpoint's new address and enable it again",
        )


def _log_row(
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


def _update_deliveries(session: Session, updates: list[dict[str, Any]]) -> None:
    """Set each delivery's columns to its row's values, in one statement run for every row."""
    if not updates:
        return
    table = Delivery.__table__
    # Bound names apart from the columns': SQLAlchemy keeps those for itself.
    columns = [name for name in updates[0] if name != "row_id"]
    statement = (
        update(table)
        .where(table.c.id == bindparam("row_id"))
        .values({name: bindparam(f"new_{name}") for name in columns})
    )
    rows = [{"row_id": row["row_id"], **{f"new_{name}": row[name] for name in columns}} for row in updates]
    session.execute(statement, rows)


def _next_state(
    settings: Settings, claim: Claim, outcome: Outcome, now: datetime
) -> tuple[str, datetime | None]:
    """The attempt's log status (`sent`, `failed`, `dead`) and when the next attempt is due."""
    if outcome.delivered:
        return "sent", None
    schedule = settings.notification_retry_schedule
    if outcome.gone or outcome.refused or claim.attempt - claim.schedule_from >= len(schedule):
        return "dead", None
    delay = schedule[claim.attempt - claim.schedule_from] * random.uniform(1 - JITTER, 1 + JITTER)
    if outcome.retry_after is not None:
        delay = max(delay, min(outcome.retry_after, MAX_RETRY_AFTER_SECONDS))
    return "failed", now + timedelta(seconds=delay)

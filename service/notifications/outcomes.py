"""Each attempt's outcome recorded with the delivery's next state: logged, moved on (sent, failed
and due again after the retry schedule's wait, or dead), its lease released; only while the lease is
still the claimer's own (see queue.py for the claims)."""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import bindparam, insert, select
from sqlalchemy.orm import Session

from api.common import format_timestamp
from service.notifications.queue import CHANNELS, DELIVERIES, LOGS, Claim, log_row, update_deliveries
from service.notifications.service import disable_channel
from service.observability import metrics
from service.settings import Settings

# A receiver asking for more than a day is answered on the schedule's terms instead.
MAX_RETRY_AFTER_SECONDS = 24 * 3600
JITTER = 0.1
ERROR_MAX_CHARS = 300


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


CURRENT = (
    select(DELIVERIES.c.id, DELIVERIES.c.lease_token, CHANNELS.c.disabled_at)
    .join(CHANNELS, CHANNELS.c.id == DELIVERIES.c.channel_id)
    .where(DELIVERIES.c.id.in_(bindparam("ids", expanding=True)))
    .with_for_update(of=DELIVERIES)
)


def record(session: Session, settings: Settings, attempts: list[Attempt]) -> None:
    """Log each attempt and move its delivery on, for the deliveries whose lease is still ours.

    A failed attempt to a channel disabled meanwhile leaves its delivery `held`; a 410 Gone makes
    it dead and disables the channel, holding the channel's other deliveries.
    """
    if not attempts:
        return
    connection = session.connection()
    ids = [done.claim.delivery_id for done in attempts]
    current = {
        row.id: (row.lease_token, row.disabled_at is not None)
        for row in connection.execute(CURRENT, {"ids": ids})
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
            }
        )
        message = claim.message
        logs.append(
            log_row(
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
    update_deliveries(session, updates)
    if logs:
        connection.execute(insert(LOGS), logs)
    for log in logs:
        metrics.DELIVERY_ATTEMPTS.labels(outcome=log["status"], channel_kind=log["channel_kind"]).inc()
    for channel_id, at in gone.items():
        disable_channel(
            session,
            channel_id=channel_id,
            now=at,
            reason=f"The endpoint answered 410 Gone on {format_timestamp(at)}; give the channel the "
            "endpoint's new address and enable it again",
        )


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

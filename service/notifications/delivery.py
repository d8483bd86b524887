"""Delivering events: the worker's fan-out and send tasks, and one sender per channel kind.

Fan-out turns each event of the outbox (`fanned_out_at` empty) into one delivery per enabled
subscribed channel, in the same transaction that marks the event done. Sending claims one due
delivery under a lease, sends it outside any transaction, then records the attempt only if the
lease is still its own. A worker that dies mid-send leaves the lease to expire, and the delivery
is sent again: at least once, never lost.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import html
import json
import random
import secrets
import smtplib
import ssl
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from email.message import EmailMessage
from typing import Any

import httpx
from sqlalchemy import Select, literal, or_, select
from sqlalchemy.orm import Session

from api.client import retry_after_seconds
from api.common import format_timestamp
from service.crypto import DecryptionFailed, cipher_for
from service.db import Database, utcnow
from service.events.models import Event
from service.notifications.models import Channel, Delivery, DeliveryLog, Subscription
from service.notifications.service import signing_key
from service.orgs.models import Organization
from service.outbound import OutboundRefused, check_outbound_url
from service.settings import Settings

FAN_OUT_BATCH = 100
# A receiver asking for more than a day is answered on the schedule's terms instead.
MAX_RETRY_AFTER_SECONDS = 24 * 3600
JITTER = 0.1
ERROR_MAX_CHARS = 300
RESPONSE_EXCERPT_BYTES = 200
JSON_HEADERS = {"Content-Type": "application/json"}

TITLES = {
    "agent.stale": "Agent is stale",
    "agent.drifted": "Agent drifted",
    "agent.error": "Agent failed to deploy",
    "deployment.complete": "Deployment complete",
    "deployment.error": "Deployment failed",
    "deployment.partial": "Deployment partly failed",
}


def fan_out_events(db: Database, settings: Settings) -> bool:
    """Turn a batch of new events into deliveries; True when there were any."""
    new_events = select(Event).where(Event.fanned_out_at.is_(None))
    if not _any(db, new_events):
        return False
    with db.session(write=True) as session:
        query = new_events.order_by(Event.occurred_at).limit(FAN_OUT_BATCH).with_for_update(skip_locked=True)
        events = list(session.scalars(query))
        now = utcnow()
        for event in events:
            for channel_id in _subscribed_channels(session, event):
                session.add(Delivery(org_id=event.org_id, event_id=event.id, channel_id=channel_id))
            event.fanned_out_at = now
        return bool(events)


def _any(db: Database, query: Select[Any]) -> bool:
    """Whether a query finds a row, asked in a read transaction: an idle worker never takes
    SQLite's write lock, which would hold up the requests that write."""
    with db.session() as session:
        return session.scalar(query.with_only_columns(literal(1)).limit(1)) is not None


def _subscribed_channels(session: Session, event: Event) -> list[str]:
    query = (
        select(Subscription.channel_id)
        .join(Channel, Channel.id == Subscription.channel_id)
        .where(
            Subscription.org_id == event.org_id,
            Subscription.event_type == event.type,
            Subscription.enabled.is_(True),
            Channel.disabled_at.is_(None),
        )
    )
    return list(session.scalars(query))


@dataclass(frozen=True)
class Claim:
    """A delivery this worker holds, with everything needed to send it outside a transaction."""

    delivery_id: str
    lease_token: str
    attempt: int
    event_id: str
    event_type: str
    occurred_at: datetime
    org_slug: str
    payload: dict[str, Any]
    channel_id: str
    channel_name: str
    channel_kind: str
    channel_config: dict[str, Any]
    channel_secret: str | None
    disabled_reason: str | None
    # Why the channel cannot be sent to this round (its secret no configured key opens).
    unsendable: str | None = None


@dataclass(frozen=True)
class Outcome:
    delivered: bool
    response_status: int | None = None
    latency_ms: int | None = None
    error: str | None = None
    retry_after: float | None = None
    gone: bool = False


def send_due_deliveries(db: Database, settings: Settings) -> bool:
    """Send one due delivery and record the attempt; True when there was one."""
    claim = _claim_next(db, settings)
    if claim is None:
        return False
    if claim.disabled_reason is not None:
        outcome = Outcome(delivered=False, error=f"The channel is disabled: {claim.disabled_reason}")
    elif claim.unsendable is not None:
        outcome = Outcome(delivered=False, error=claim.unsendable)
    else:
        outcome = _send(claim, settings)
    _record_attempt(db, settings, claim, outcome)
    return True


def _claim_next(db: Database, settings: Settings) -> Claim | None:
    now = utcnow()
    due = select(Delivery).where(
        Delivery.status == "pending",
        Delivery.next_attempt_at <= now,
        or_(Delivery.lease_expires_at.is_(None), Delivery.lease_expires_at < now),
    )
    if not _any(db, due):
        return None
    with db.session(write=True) as session:
        delivery = session.scalar(
            due.order_by(Delivery.next_attempt_at).limit(1).with_for_update(skip_locked=True)
        )
        if delivery is None:
            return None
        delivery.lease_token = secrets.token_hex(16)
        delivery.lease_expires_at = now + timedelta(seconds=settings.notification_lease_seconds)
        event = session.get_one(Event, delivery.event_id)
        channel = session.get_one(Channel, delivery.channel_id)
        org_slug = session.scalar(select(Organization.slug).where(Organization.id == delivery.org_id))
        secret, unsendable = _channel_secret(channel, settings)
        return Claim(
            delivery_id=delivery.id,
            lease_token=delivery.lease_token,
            attempt=delivery.attempts + 1,
            event_id=event.id,
            event_type=event.type,
            occurred_at=event.occurred_at,
            org_slug=org_slug or "",
            payload=event.payload,
            channel_id=channel.id,
            channel_name=channel.name,
            channel_kind=channel.kind,
            channel_config=dict(channel.config),
            channel_secret=secret,
            disabled_reason=channel.disabled_reason if channel.disabled_at else None,
            unsendable=unsendable,
        )


def _channel_secret(channel: Channel, settings: Settings) -> tuple[str | None, str | None]:
    """The channel's decrypted secret, or why it cannot be had: one channel whose key was removed
    too early fails its own deliveries on their schedule instead of stopping every other one."""
    if not channel.secret_encrypted:
        return None, None
    try:
        return cipher_for(settings).decrypt(channel.secret_encrypted), None
    except DecryptionFailed:
        return None, (
            "The channel's secret cannot be decrypted with the configured encryption keys; "
            "add the key it was written with to ORGDECK_ENCRYPTION_KEYS"
        )


def _record_attempt(db: Database, settings: Settings, claim: Claim, outcome: Outcome) -> None:
    """Write the attempt's log row and the delivery's next state, if the lease is still ours."""
    with db.session(write=True) as session:
        query = select(Delivery).where(
            Delivery.id == claim.delivery_id, Delivery.lease_token == claim.lease_token
        )
        delivery = session.scalar(query.with_for_update())
        if delivery is None:
            return  # the lease expired and another worker took over, or the channel was deleted
        now = utcnow()
        delivery.attempts = claim.attempt
        delivery.lease_token = None
        delivery.lease_expires_at = None
        status, next_attempt_at = _next_state(settings, claim, outcome, now)
        delivery.status = "pending" if status == "failed" else status
        delivery.next_attempt_at = next_attempt_at
        if outcome.gone:
            _disable_channel(session, claim.channel_id, now)
        session.add(
            DeliveryLog(
                org_id=delivery.org_id,
                delivery_id=delivery.id,
                event_id=claim.event_id,
                event_type=claim.event_type,
                channel_id=claim.channel_id,
                channel_name=claim.channel_name,
                channel_kind=claim.channel_kind,
                attempt=claim.attempt,
                status=status,
                response_status=outcome.response_status,
                latency_ms=outcome.latency_ms,
                error=outcome.error[:ERROR_MAX_CHARS] if outcome.error else None,
                next_attempt_at=next_attempt_at,
                created_at=now,
            )
        )


def _next_state(
    settings: Settings, claim: Claim, outcome: Outcome, now: datetime
) -> tuple[str, datetime | None]:
    """The attempt's log status (`sent`, `failed`, `dead`) and when the next attempt is due."""
    if outcome.delivered:
        return "sent", None
    schedule = settings.notification_retry_schedule
    if outcome.gone or claim.disabled_reason is not None or claim.attempt >= len(schedule):
        return "dead", None
    delay = schedule[claim.attempt] * random.uniform(1 - JITTER, 1 + JITTER)
    if outcome.retry_after is not None:
        delay = max(delay, min(outcome.retry_after, MAX_RETRY_AFTER_SECONDS))
    return "failed", now + timedelta(seconds=delay)


def _disable_channel(session: Session, channel_id: str, now: datetime) -> None:
    channel = session.get(Channel, channel_id)
    if channel is not None and channel.disabled_at is None:
        channel.disabled_at = now
        channel.disabled_reason = (
            f"The endpoint answered 410 Gone on {format_timestamp(now)}; delete the channel "
            "and create a new one with the endpoint's new address"
        )


# -- senders ------------------------------------------------------------------------------


def _send(claim: Claim, settings: Settings) -> Outcome:
    if claim.channel_kind == "email":
        return _send_email(claim, settings)
    if claim.channel_kind == "webhook":
        content, signature_headers = _webhook_request(claim)
        return _post(claim.channel_config["url"], content, signature_headers, settings)
    assert claim.channel_secret is not None, "a Slack channel's URL is kept encrypted"
    return _post(claim.channel_secret, json.dumps(slack_message(claim, settings)).encode(), {}, settings)


def webhook_body(claim: Claim) -> dict[str, Any]:
    """The Standard Webhooks payload shape: type, timestamp and the event's data."""
    return {
        "type": claim.event_type,
        "timestamp": format_timestamp(claim.occurred_at),
        "data": {"eventId": claim.event_id, "orgSlug": claim.org_slug, **claim.payload},
    }


def _webhook_request(claim: Claim) -> tuple[bytes, dict[str, str]]:
    content = json.dumps(webhook_body(claim), separators=(",", ":")).encode()
    timestamp = str(int(time.time()))
    assert claim.channel_secret is not None, "a webhook channel always has a signing secret"
    signed = f"{claim.delivery_id}.{timestamp}.".encode() + content
    digest = hmac.new(signing_key(claim.channel_secret), signed, hashlib.sha256).digest()
    signature = "v1," + base64.b64encode(digest).decode()
    return content, {
        "webhook-id": claim.delivery_id,
        "webhook-timestamp": timestamp,
        "webhook-signature": signature,
    }


def _post(url: str, content: bytes, headers: dict[str, str], settings: Settings) -> Outcome:
    started = time.monotonic()
    try:
        check_outbound_url(url, settings)
        with (
            httpx.Client(timeout=httpx.Timeout(settings.notification_timeout_seconds), verify=_tls()) as http,
            http.stream("POST", url, content=content, headers=JSON_HEADERS | headers) as response,
        ):
            excerpt = _excerpt(response)
    except OutboundRefused as exc:
        return Outcome(delivered=False, error=str(exc))
    except httpx.TimeoutException:
        return Outcome(
            delivered=False,
            latency_ms=_elapsed_ms(started),
            error=f"No answer within {settings.notification_timeout_seconds:g} s",
        )
    except httpx.HTTPError as exc:
        return Outcome(delivered=False, latency_ms=_elapsed_ms(started), error=f"{type(exc).__name__}: {exc}")
    status = response.status_code
    if response.is_success:
        return Outcome(delivered=True, response_status=status, latency_ms=_elapsed_ms(started))
    return Outcome(
        delivered=False,
        response_status=status,
        latency_ms=_elapsed_ms(started),
        error=f"HTTP {status}" + (f": {excerpt}" if excerpt else ""),
        retry_after=retry_after_seconds(response),
        gone=status == 410,
    )


@functools.cache
def _tls() -> ssl.SSLContext:
    """httpx's own certificate checks, made once per process: loading the CA certificates takes
    longer than a whole delivery to a nearby receiver."""
    return httpx.create_ssl_context()


def _excerpt(response: httpx.Response) -> str:
    """The start of the answer, enough to explain a failure without reading a large body."""
    received = b""
    for chunk in response.iter_bytes():
        received += chunk
        if len(received) >= RESPONSE_EXCERPT_BYTES:
            break
    return received[:RESPONSE_EXCERPT_BYTES].decode(errors="replace").strip()


def _elapsed_ms(started: float) -> int:
    return round((time.monotonic() - started) * 1000)


def summary(claim: Claim) -> str:
    """One readable line, e.g. "Deployment failed: production, agents support-bot, job job_9"."""
    payload = claim.payload
    details = []
    environment = payload.get("environmentName") or payload.get("environment")
    if environment:
        details.append(str(environment.get("name", "?") if isinstance(environment, dict) else environment))
    agents = payload.get("agents") or ([payload["stableKey"]] if payload.get("stableKey") else [])
    if agents:
        names = [str(a.get("stableKey", "?")) if isinstance(a, dict) else str(a) for a in agents]
        more = f" and {len(names) - 5} more" if len(names) > 5 else ""
        details.append(f"agent{'s' if len(names) > 1 else ''} {', '.join(names[:5])}{more}")
    if payload.get("jobId"):
        details.append(f"job {payload['jobId']}")
    if payload.get("test"):
        details.append("test notification")
    title = TITLES.get(claim.event_type, claim.event_type)
    return f"{title}: {', '.join(details)}" if details else title


def console_link(claim: Claim, settings: Settings) -> str | None:
    if not settings.console_url:
        return None
    page = "notifications" if claim.payload.get("test") else claim.event_type.split(".")[0] + "s"
    return f"{settings.console_url.rstrip('/')}/{page}"


def slack_message(claim: Claim, settings: Settings) -> dict[str, Any]:
    """An incoming-webhook message: `text` for notifications, blocks for the channel."""
    text = f"[{claim.org_slug}] {summary(claim)}"
    context = f"{claim.event_type} · {format_timestamp(claim.occurred_at)}"
    link = console_link(claim, settings)
    if link:
        context += f" · <{link}|Open in Orgdeck>"
    return {
        "text": text,
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": f"*{_slack_escape(text)}*"}},
            {"type": "context", "elements": [{"type": "mrkdwn", "text": context}]},
        ],
    }


def _slack_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def email_message(claim: Claim, settings: Settings) -> EmailMessage:
    message = EmailMessage()
    title = summary(claim)
    message["Subject"] = f"[Orgdeck] {title}"
    message["From"] = settings.smtp_from
    message["To"] = ", ".join(claim.channel_config["recipients"])
    link = console_link(claim, settings)
    details = json.dumps(claim.payload, indent=2, sort_keys=True)
    when = format_timestamp(claim.occurred_at)
    lines = [title, "", f"Organization: {claim.org_slug}", f"Event: {claim.event_type} at {when}"]
    message.set_content("\n".join([*lines, *([f"Open in Orgdeck: {link}"] if link else []), "", details]))
    link_html = f'<p><a href="{html.escape(link)}">Open in Orgdeck</a></p>' if link else ""
    message.add_alternative(
        f"<h2>{html.escape(title)}</h2><p>Organization: {html.escape(claim.org_slug)}<br>"
        f"Event: {html.escape(claim.event_type)} at {when}</p>{link_html}"
        f"<pre>{html.escape(details)}</pre>",
        subtype="html",
    )
    return message


def _send_email(claim: Claim, settings: Settings) -> Outcome:
    if not settings.smtp_host:
        return Outcome(delivered=False, error="Email is not configured: set ORGDECK_SMTP_HOST")
    started = time.monotonic()
    timeout = settings.notification_timeout_seconds
    try:
        with smtplib.SMTP(settings.smtp_host, settings.smtp_port, timeout=timeout) as smtp:
            if settings.smtp_starttls:
                smtp.starttls(context=ssl.create_default_context())
            if settings.smtp_username:
                smtp.login(settings.smtp_username, settings.smtp_password or "")
            smtp.send_message(email_message(claim, settings))
    except (smtplib.SMTPException, OSError) as exc:
        return Outcome(delivered=False, latency_ms=_elapsed_ms(started), error=f"SMTP: {exc}")
    return Outcome(delivered=True, latency_ms=_elapsed_ms(started))

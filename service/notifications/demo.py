"""Demo notification channels and subscriptions, a receiver for them, and a month of deliveries.

The channels deliver to a receiver the embedded service runs on loopback, which accepts every
message: what the demo sends now gets through, and no outside host is ever called. The month
before (successes, retries, an outage with a dead delivery) cannot be made through the API, which
stamps every attempt with the current time, so `seed_delivery_history` writes it into the database,
once, as finished deliveries that no worker will pick up again. Its events say they are demo data.
"""

from __future__ import annotations

import json
import random
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, time, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from api import OrgdeckClient
from service.agents.demo import DEMO_AGENTS
from service.environments.demo import DEMO_ENVIRONMENTS
from service.events.models import EventRow
from service.notifications.messages import JSON, USER_AGENT, Message, webhook_json
from service.notifications.models import ChannelRow, DeliveryLogRow, DeliveryRow, SubscriptionRow
from service.orgs.service import get_org
from service.outbound.webhooks import signature_headers
from service.storage.crypto import Cipher
from service.storage.db import Base, Database, utcnow
from service.storage.ids import new_id

WEBHOOK = "Release webhook"
SLACK = "#platform-alerts"
RECEIVED = json.dumps({"received": True, "by": "the Orgdeck demo receiver"}).encode()
# What the month's events carry, so that the console and every receiver can tell them apart.
DEMO_NOTE = "Demo data: made-up history of the demo organization"


@dataclass(frozen=True)
class DemoChannel:
    kind: str
    path: str
    event_types: tuple[str, ...]


DEMO_CHANNELS = {
    WEBHOOK: DemoChannel(
        "webhook",
        "/hooks/orgdeck",
        ("deployment.complete", "deployment.error", "deployment.partial"),
    ),
    SLACK: DemoChannel(
        "slack",
        "/services/T0DEMO/B0DEMO/platform-alerts",
        ("deployment.error", "deployment.partial", "agent.error", "agent.drifted", "agent.stale"),
    ),
}


class DemoReceiver:
    """A webhook and Slack endpoint on loopback for the demo's channels: it answers every POST
    200 with a short JSON note, which is what the console then shows as each attempt's answer."""

    def __init__(self) -> None:
        self._server = _Server(("127.0.0.1", 0), _Accept)
        self._thread = threading.Thread(target=self._server.serve_forever, name="demo-receiver", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> DemoReceiver:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # Room for every connection a sender opens at once (the default of 5 resets the others).
    request_queue_size = 128


class _Accept(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", JSON)
        self.send_header("Content-Length", str(len(RECEIVED)))
        self.end_headers()
        self.wfile.write(RECEIVED)

    def log_message(self, *args: object) -> None:
        pass


def seed_notifications(client: OrgdeckClient, *, receiver_url: str) -> None:
    """The demo channels, each subscribed to its event types when it is created (later edits stay),
    pointed at this run's receiver (its port changes from one start to the next)."""
    existing = {channel.name: channel for channel in client.notifications.list_channels().items}
    for name, demo in DEMO_CHANNELS.items():
        url = receiver_url + demo.path
        channel = existing.get(name)
        if channel is None:
            created = client.notifications.create_channel(name, demo.kind, url=url)
            for event_type in demo.event_types:
                client.notifications.subscribe(created.id, event_type)
        elif channel.kind == demo.kind and channel.config.get("url") != url:
            # A Slack channel shows its host only, so it is always given this run's address.
            client.notifications.update_channel(channel.id, url=url)


# -- the month before -------------------------------------------------------------------------

HISTORY_DAYS = 30
# The webhook receiver is down for 32 hours from 22:00 UTC nine days ago: the delivery made just
# after it went down spends every retry of the default schedule (27.6 hours, 30.3 at most with
# jitter) and ends dead; the next day's deliveries, from 08:00, fail until it is back, then get through.
OUTAGE_DAYS_AGO = 9
OUTAGE_HOURS = 32
AGENT_ERRORS = (
    "The webhook target answered HTTP 502",
    "Secret ZENDESK_TOKEN is not set in this environment",
    "Prompt reference demo/support-prompts/escalation@staging has no version labelled staging",
)
TRANSIENT_FAILURES = (
    (502, "HTTP 502: Bad Gateway"),
    (503, "HTTP 503: upstream connect error or disconnect/reset before headers"),
    (429, "HTTP 429: rate_limited"),
    (None, "No answer within 15 s"),
)
OUTAGE_FAILURE = (503, "HTTP 503: no healthy upstream")


@dataclass
class History:
    """The history being made: the rows so far, and what decides the next ones."""

    org_id: str
    org_slug: str
    channels: dict[str, ChannelRow]
    cipher: Cipher
    retry_schedule: list[float]
    outage: tuple[datetime, datetime]
    rng: random.Random
    rows: list[Base] = field(default_factory=list)


def seed_delivery_history(
    db: Database, *, org_slug: str, retry_schedule: list[float], cipher: Cipher
) -> None:
    """A month of delivered and dead notifications to the demo channels, written once."""
    with db.session(write=True) as session:
        org = get_org(session, slug=org_slug)
        now = utcnow()
        if org is None or _has_history(session, org_id=org.id, before=now - timedelta(days=1)):
            return
        query = select(ChannelRow).where(
            ChannelRow.org_id == org.id, ChannelRow.name.in_(list(DEMO_CHANNELS))
        )
        channels = {channel.name: channel for channel in session.scalars(query)}
        if not channels:
            return
        first_day = datetime.combine(now.date(), time.min, tzinfo=UTC) - timedelta(days=HISTORY_DAYS - 1)
        _backdate(session, list(channels.values()), first_day - timedelta(days=1))
        outage_start = first_day + timedelta(days=HISTORY_DAYS - 1 - OUTAGE_DAYS_AGO, hours=22)
        history = History(
            org_id=org.id,
            org_slug=org_slug,
            channels=channels,
            cipher=cipher,
            retry_schedule=retry_schedule,
            outage=(outage_start, outage_start + timedelta(hours=OUTAGE_HOURS)),
            rng=random.Random(HISTORY_DAYS),
        )
        for day in (first_day + timedelta(days=n) for n in range(HISTORY_DAYS)):
            _day_of_events(history, day, until=now - timedelta(hours=1))
        # The delivery the outage costs: a deployment reported just after the receiver went down.
        _deployment(history, outage_start + timedelta(minutes=2), environment="production")
        session.add_all(history.rows)


def _has_history(session: Session, *, org_id: str, before: datetime) -> bool:
    """Whether the log goes back further than `before`, which only a written history does."""
    # The worker stamps every attempt with the present, so it can never have written these rows.
    query = select(DeliveryLogRow.id).where(
        DeliveryLogRow.org_id == org_id, DeliveryLogRow.created_at < before
    )
    return session.scalar(query.limit(1)) is not None


def _backdate(session: Session, channels: list[ChannelRow], moment: datetime) -> None:
    """The channels and their subscriptions were made before the deliveries they received."""
    for channel in channels:
        channel.created_at = min(channel.created_at, moment)
    query = select(SubscriptionRow).where(SubscriptionRow.channel_id.in_([c.id for c in channels]))
    for subscription in session.scalars(query):
        subscription.created_at = subscription.updated_at = min(subscription.created_at, moment)


def _day_of_events(history: History, day: datetime, *, until: datetime) -> None:
    """A working day's few deployments (weekends see one at most), and now and then a drift."""
    rng = history.rng
    count = rng.randint(0, 1) if day.weekday() >= 5 else rng.randint(2, 6)
    for at in sorted(day + timedelta(hours=rng.uniform(8, 19)) for _ in range(count)):
        if at < until:
            _deployment(history, at, environment=rng.choice(list(DEMO_ENVIRONMENTS)))
    at = day + timedelta(hours=rng.uniform(6, 20))
    if rng.random() < 0.4 and at < until:
        agent = rng.choice(DEMO_AGENTS)
        kind = rng.choice(("agent.drifted", "agent.stale"))
        where = {"stableKey": agent.stable_key, "environmentName": rng.choice(list(DEMO_ENVIRONMENTS))}
        _event(history, kind, at, where | {"version": len(agent.history)})


def _deployment(history: History, at: datetime, *, environment: str) -> None:
    """A deployment job's end (complete, partial or error) and an `agent.error` per failed agent."""
    rng = history.rng
    agents = []
    for agent in rng.sample(DEMO_AGENTS, k=rng.randint(1, 3)):
        error = rng.choice(AGENT_ERRORS) if rng.random() < 0.1 else None
        agents.append(
            {
                "stableKey": agent.stable_key,
                "version": len(agent.history),
                "status": "error" if error else "complete",
                "error": error,
            }
        )
    failed = [a for a in agents if a["error"]]
    status = "complete" if not failed else "error" if len(failed) == len(agents) else "partial"
    _event(history, f"deployment.{status}", at, {"environmentName": environment, "agents": agents})
    for agent in failed:
        _event(history, "agent.error", at, {"environmentName": environment, **agent})


def _event(history: History, event_type: str, at: datetime, payload: dict[str, Any]) -> None:
    """The event, already fanned out, and its delivery to each demo channel subscribed to it."""
    # Ids given here, not at flush: the deliveries and log rows name them before anything is written.
    # Dated like the rows, so that ids sort by time as the service's own do.
    event = EventRow(
        id=new_id("evt", at=at),
        org_id=history.org_id,
        type=event_type,
        payload={**payload, "demo": DEMO_NOTE},
        occurred_at=at,
        fanned_out_at=at,
    )
    history.rows.append(event)
    for name, channel in history.channels.items():
        if event_type in DEMO_CHANNELS[name].event_types:
            _delivery(history, event, channel)


def _delivery(history: History, event: EventRow, channel: ChannelRow) -> None:
    """Attempts on the retry schedule until one gets through or the schedule is spent."""
    rng = history.rng
    delivery = DeliveryRow(
        id=new_id("msg", at=event.occurred_at),
        org_id=history.org_id,
        event_id=event.id,
        event_type=event.type,
        channel_id=channel.id,
        created_at=event.occurred_at,
        next_attempt_at=None,
    )
    history.rows.append(delivery)
    at = event.occurred_at
    for attempt in range(1, len(history.retry_schedule) + 1):
        failure = _failure(history, channel, at, first=attempt == 1)
        status = "sent" if failure is None else "failed" if attempt < len(history.retry_schedule) else "dead"
        next_at = None
        if status == "failed":
            next_at = at + timedelta(seconds=history.retry_schedule[attempt] * rng.uniform(0.9, 1.1))
        response_status, error = failure or (200, None)
        history.rows.append(
            DeliveryLogRow(
                id=new_id("log", at=at),
                org_id=history.org_id,
                delivery_id=delivery.id,
                event_id=event.id,
                event_type=event.type,
                channel_id=channel.id,
                channel_name=channel.name,
                channel_kind=channel.kind,
                attempt=attempt,
                status=status,
                response_status=response_status,
                latency_ms=15000 if response_status is None else rng.randint(40, 450),
                error=error,
                next_attempt_at=next_at,
                created_at=at,
                request_headers=_request_headers(history, delivery.id, event, channel, at),
                **_answer(response_status, error),
            )
        )
        if next_at is None:
            delivery.attempts, delivery.status, delivery.last_attempt_at = attempt, status, at
            delivery.last_response_status, delivery.last_error = response_status, error
            return
        at = next_at


def _request_headers(
    history: History, delivery_id: str, event: EventRow, channel: ChannelRow, at: datetime
) -> dict[str, str]:
    """The headers the attempt was sent with: a webhook's signed with the channel's own secret."""
    headers = {"Content-Type": JSON, "User-Agent": USER_AGENT}
    if channel.kind != "webhook" or not channel.secret_encrypted:
        return headers
    message = Message(
        delivery_id=delivery_id,
        event_id=event.id,
        event_type=event.type,
        occurred_at=event.occurred_at,
        org_slug=history.org_slug,
        payload=event.payload,
        channel_kind=channel.kind,
        channel_config=channel.config,
    )
    secret = history.cipher.decrypt(channel.secret_encrypted)
    signed = signature_headers(delivery_id, webhook_json(message), [secret], timestamp=int(at.timestamp()))
    return headers | signed


def _answer(status: int | None, error: str | None) -> dict[str, Any]:
    """The receiver's answer as an attempt keeps it: the demo receiver's note, or the error's words."""
    if status is None:
        return {"response_headers": None, "response_body": None}
    text = RECEIVED.decode() if error is None else error.split(": ", 1)[-1]
    kind = JSON if error is None else "text/plain"
    return {
        "response_headers": {"content-type": kind, "content-length": str(len(text))},
        "response_body": text,
    }


def _failure(
    history: History, channel: ChannelRow, at: datetime, *, first: bool
) -> tuple[int | None, str] | None:
    """Why an attempt at `at` failed, or None when it got through."""
    start, end = history.outage
    if channel.kind == "webhook" and start <= at < end:
        return OUTAGE_FAILURE
    # Now and then a receiver has a bad moment; the retry a few seconds later gets through.
    if first and history.rng.random() < 0.08:
        return history.rng.choice(TRANSIENT_FAILURES)
    return None

"""Demo notification channels and subscriptions, and a month of their deliveries.

Both channels point at the discard port on loopback, where nothing listens: whatever the demo
delivers now fails at once with "connection refused", is retried on the schedule and ends dead,
and no outside host is ever called. The month before (successes, retries, an outage with a dead
delivery) cannot be made through the API, which stamps every attempt with the current time, so
`seed_delivery_history` writes it into the database, once, as finished deliveries that no worker
will pick up again.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, time, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from api import OrgdeckClient
from service.agents.demo import DEMO_AGENTS
from service.db import Base, Database, utcnow
from service.environments.demo import DEMO_ENVIRONMENTS
from service.events.models import Event
from service.ids import new_id
from service.notifications.models import Channel, Delivery, DeliveryLog, Subscription
from service.orgs.service import get_org

# The discard port: nothing listens there, so a delivery is refused at once, on this machine.
RECEIVER = "http://127.0.0.1:9"
WEBHOOK = "Release webhook"
SLACK = "#platform-alerts"


@dataclass(frozen=True)
class DemoChannel:
    kind: str
    url: str
    event_types: tuple[str, ...]


DEMO_CHANNELS = {
    WEBHOOK: DemoChannel(
        "webhook",
        f"{RECEIVER}/hooks/orgdeck",
        ("deployment.complete", "deployment.error", "deployment.partial"),
    ),
    SLACK: DemoChannel(
        "slack",
        f"{RECEIVER}/services/T0DEMO/B0DEMO/platform-alerts",
        ("deployment.error", "deployment.partial", "agent.error", "agent.drifted", "agent.stale"),
    ),
}


def seed_notifications(client: OrgdeckClient) -> None:
    """The demo channels, each subscribed to its event types when it is created (later edits stay)."""
    existing = {channel.name for channel in client.notifications.list_channels().items}
    for name, demo in DEMO_CHANNELS.items():
        if name in existing:
            continue
        channel = client.notifications.create_channel(name, demo.kind, url=demo.url)
        for event_type in demo.event_types:
            client.notifications.subscribe(channel.id, event_type)


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
    channels: dict[str, Channel]
    retry_schedule: list[float]
    outage: tuple[datetime, datetime]
    rng: random.Random
    rows: list[Base] = field(default_factory=list)


def seed_delivery_history(db: Database, *, org_slug: str, retry_schedule: list[float]) -> None:
    """A month of delivered and dead notifications to the demo channels, written once."""
    with db.session(write=True) as session:
        org = get_org(session, slug=org_slug)
        now = utcnow()
        if org is None or _has_history(session, org_id=org.id, before=now - timedelta(days=1)):
            return
        query = select(Channel).where(Channel.org_id == org.id, Channel.name.in_(list(DEMO_CHANNELS)))
        channels = {channel.name: channel for channel in session.scalars(query)}
        if not channels:
            return
        first_day = datetime.combine(now.date(), time.min, tzinfo=UTC) - timedelta(days=HISTORY_DAYS - 1)
        _backdate(session, list(channels.values()), first_day - timedelta(days=1))
        outage_start = first_day + timedelta(days=HISTORY_DAYS - 1 - OUTAGE_DAYS_AGO, hours=22)
        history = History(
            org_id=org.id,
            channels=channels,
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
    query = select(DeliveryLog.id).where(DeliveryLog.org_id == org_id, DeliveryLog.created_at < before)
    return session.scalar(query.limit(1)) is not None


def _backdate(session: Session, channels: list[Channel], moment: datetime) -> None:
    """The channels and their subscriptions were made before the deliveries they received."""
    for channel in channels:
        channel.created_at = min(channel.created_at, moment)
    query = select(Subscription).where(Subscription.channel_id.in_([c.id for c in channels]))
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
    event = Event(
        id=new_id("evt", at=at),
        org_id=history.org_id,
        type=event_type,
        payload=payload,
        occurred_at=at,
        fanned_out_at=at,
    )
    history.rows.append(event)
    for name, channel in history.channels.items():
        if event_type in DEMO_CHANNELS[name].event_types:
            _delivery(history, event, channel)


def _delivery(history: History, event: Event, channel: Channel) -> None:
    """Attempts on the retry schedule until one gets through or the schedule is spent."""
    rng = history.rng
    delivery = Delivery(
        id=new_id("msg", at=event.occurred_at),
        org_id=history.org_id,
        event_id=event.id,
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
        response_status, error = failure or (rng.choice((200, 200, 204)), None)
        history.rows.append(
            DeliveryLog(
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
                latency_ms=15000 if error and error.startswith("No answer") else rng.randint(40, 450),
                error=error,
                next_attempt_at=next_at,
                created_at=at,
            )
        )
        if next_at is None:
            delivery.attempts, delivery.status = attempt, status
            return
        at = next_at


def _failure(
    history: History, channel: Channel, at: datetime, *, first: bool
) -> tuple[int | None, str] | None:
    """Why an attempt at `at` failed, or None when it got through."""
    start, end = history.outage
    if channel.kind == "webhook" and start <= at < end:
        return OUTAGE_FAILURE
    # Now and then a receiver has a bad moment; the retry a few seconds later gets through.
    if first and history.rng.random() < 0.08:
        return history.rng.choice(TRANSIENT_FAILURES)
    return None

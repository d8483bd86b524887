"""Notification channels, subscriptions and the delivery log's query: the API over HTTP."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import pytest
from cryptography.fernet import Fernet
from sqlalchemy import func, select

from api import OrgdeckClient
from api.errors import BadRequest, NotFound
from api.events import EVENT_TYPES
from api.notifications import LogEntry
from service.events.models import EventRow
from service.notifications.demo import (
    DEMO_CHANNELS,
    DEMO_NOTE,
    DemoReceiver,
    seed_delivery_history,
    seed_notifications,
)
from service.notifications.models import ChannelRow, DeliveryLogRow, DeliveryRow
from service.notifications.service import rotate_channel_secrets
from service.orgs.models import OrganizationRow
from service.storage.crypto import Cipher, cipher_for
from service.storage.db import Database
from tests.conftest import Org, raw_database_contains, wait_for

WEBHOOK_URL = "https://hooks.example.com/orgdeck"
SLACK_URL = "https://hooks.slack.com/services/T000/B000/slack-url-is-a-credential"


def test_webhook_channel_secret_is_shown_once_and_stored_encrypted(client, database_url):
    created = client.notifications.create_channel("Ops hook", "webhook", url=WEBHOOK_URL)
    assert created.id.startswith("ch_")
    assert created.signing_secret and created.signing_secret.startswith("whsec_")
    assert created.config == {"url": WEBHOOK_URL}
    assert created.state == "active"
    listed = client.notifications.list_channels()
    assert [c.id for c in listed.items] == [created.id]
    assert "whsec_" not in listed.model_dump_json()
    assert not raw_database_contains(database_url, created.signing_secret)


def test_slack_url_is_a_secret_shown_by_host_only(client, http, org, database_url):
    created = client.notifications.create_channel("Ops slack", "slack", url=SLACK_URL)
    assert created.signing_secret is None
    assert created.config == {"url": "https://hooks.slack.com/…"}
    listing = http.get("notifications/channels", params={"orgSlug": org.slug}, headers=org.headers)
    assert "slack-url-is-a-credential" not in listing.text
    assert not raw_database_contains(database_url, "slack-url-is-a-credential")


def test_email_channel_shows_its_recipients(client):
    created = client.notifications.create_channel("Ops mail", "email", recipients=["ops@example.com"])
    assert created.config == {"recipients": ["ops@example.com"]}


@pytest.mark.parametrize(
    ("kind", "config", "field"),
    [
        ("webhook", {}, "config.url"),
        ("slack", {"recipients": ["a@example.com"]}, "config.url"),
        ("email", {"url": WEBHOOK_URL}, "config.recipients"),
        ("webhook", {"url": "ftp://example.com/x"}, "config.url"),
        ("email", {"recipients": ["not-an-address"]}, "config.recipients.0"),
        # Each of these a mail header would read as another address than the one typed.
        ("email", {"recipients": ["ops@example.com", "a,b@example.com"]}, "config.recipients.1"),
        ("email", {"recipients": ["ops@[10.0.0.1]"]}, "config.recipients.0"),
        ("email", {"recipients": ["(ops@example.com"]}, "config.recipients.0"),
        ("email", {"recipients": ["ops\u0000@example.com"]}, "config.recipients.0"),
        ("email", {"recipients": []}, "config.recipients"),
        ("pager", {"url": WEBHOOK_URL}, "kind"),
        ("webhook", {"url": WEBHOOK_URL, "secret": "x"}, "config.secret"),
    ],
)
def test_invalid_channel_is_400_naming_the_field(http, org, kind, config, field):
    body = {"orgSlug": org.slug, "name": "Bad", "kind": kind, "config": config}
    response = http.post("notifications/channels", json=body, headers=org.headers)
    assert response.status_code == 400, response.text
    assert field in [detail["field"] for detail in response.json()["details"]]


def test_duplicate_channel_name_is_already_exists(client):
    client.notifications.create_channel("Twice", "webhook", url=WEBHOOK_URL)
    with pytest.raises(BadRequest) as error:
        client.notifications.create_channel("Twice", "email", recipients=["ops@example.com"])
    assert error.value.code == "already_exists"


def test_subscribing_again_updates_enabled(client):
    channel = client.notifications.create_channel("Subs", "webhook", url=WEBHOOK_URL)
    first = client.notifications.subscribe(channel.id, "deployment.error")
    assert first.enabled is True
    again = client.notifications.subscribe(channel.id, "deployment.error", enabled=False)
    assert again.id == first.id and again.enabled is False
    client.notifications.subscribe(channel.id, "agent.drifted")
    listed = client.notifications.list_subscriptions(channel_id=channel.id)
    assert {(s.event_type, s.enabled) for s in listed.items} == {
        ("deployment.error", False),
        ("agent.drifted", True),
    }
    removed = client.notifications.unsubscribe(channel.id, "agent.drifted")
    assert removed.event_type == "agent.drifted"
    assert [s.event_type for s in client.notifications.list_subscriptions().items] == ["deployment.error"]
    with pytest.raises(NotFound):
        client.notifications.unsubscribe(channel.id, "agent.drifted")


def test_unknown_event_type_lists_the_allowed(http, org, client):
    channel = client.notifications.create_channel("Typo", "webhook", url=WEBHOOK_URL)
    body = {"orgSlug": org.slug, "channelId": channel.id, "eventType": "deployment.failed"}
    response = http.post("notifications/subscriptions/subscribe", json=body, headers=org.headers)
    assert response.status_code == 400
    assert response.json()["details"][0]["field"] == "eventType"
    for event_type in EVENT_TYPES:
        assert event_type in response.json()["message"]


def test_another_orgs_channel_is_not_found_on_every_route(client, http, other_org):
    channel = client.notifications.create_channel("Mine", "webhook", url=WEBHOOK_URL)
    client.notifications.subscribe(channel.id, "agent.error")
    theirs = {"orgSlug": other_org.slug}
    calls = [
        ("DELETE", f"notifications/channels/{channel.id}", theirs, None),
        ("POST", f"notifications/channels/{channel.id}/test", {}, theirs),
        (
            "POST",
            "notifications/subscriptions/subscribe",
            {},
            {**theirs, "channelId": channel.id, "eventType": "agent.stale"},
        ),
        (
            "POST",
            "notifications/subscriptions/unsubscribe",
            {},
            {**theirs, "channelId": channel.id, "eventType": "agent.error"},
        ),
    ]
    for method, path, params, body in calls:
        response = http.request(method, path, params=params, json=body, headers=other_org.headers)
        assert response.status_code == 404, (path, response.text)
        assert response.json()["code"] == "not_found"
    for path in ("notifications/channels", "notifications/subscriptions", "notifications/logs"):
        listing = http.get(path, params=theirs, headers=other_org.headers)
        assert listing.json()["items"] == [], path
    assert [s.channel_id for s in client.notifications.list_subscriptions().items] == [channel.id]


def test_deleting_a_channel_deletes_its_subscriptions(client):
    channel = client.notifications.create_channel("Doomed", "webhook", url=WEBHOOK_URL)
    client.notifications.subscribe(channel.id, "agent.stale")
    deleted = client.notifications.delete_channel(channel.id)
    assert deleted.id == channel.id
    assert client.notifications.list_channels().items == []
    assert client.notifications.list_subscriptions().items == []
    with pytest.raises(NotFound):
        client.notifications.delete_channel(channel.id)


# -- the delivery log's query ---------------------------------------------------------------

BASE = datetime(2026, 3, 1, tzinfo=UTC)


def seed_logs(db: Database, org: Org, count: int) -> list[DeliveryLogRow]:
    """`count` attempts one hour apart from BASE, cycling statuses, event types and two channels."""
    statuses = ("sent", "failed", "dead")
    with db.session(write=True) as session:
        org_id = session.scalar(select(OrganizationRow.id).where(OrganizationRow.slug == org.slug))
        assert org_id is not None
        rows = [
            DeliveryLogRow(
                org_id=org_id,
                delivery_id=f"msg_{index}",
                event_id=f"evt_{index}",
                event_type=EVENT_TYPES[index % len(EVENT_TYPES)],
                channel_id=f"ch_{index % 2}",
                channel_name=f"Channel {index % 2}",
                channel_kind="webhook",
                attempt=1,
                status=statuses[index % 3],
                created_at=BASE + timedelta(hours=index),
            )
            for index in range(count)
        ]
        session.add_all(rows)
    return rows


def logs(http, org: Org, params: dict | list) -> dict:
    response = http.get("notifications/logs", params=params, headers=org.headers)
    assert response.status_code == 200, response.text
    return response.json()


def test_logs_are_newest_first_with_default_page_and_total(http, org, db):
    seed_logs(db, org, 60)
    answer = logs(http, org, {"orgSlug": org.slug})
    assert answer["total"] == 60
    assert answer["limit"] == 50 and answer["offset"] == 0
    assert len(answer["items"]) == 50
    times = [item["createdAt"] for item in answer["items"]]
    assert times == sorted(times, reverse=True)
    assert times[0] == "2026-03-03T11:00:00.000Z"


def test_an_entry_on_the_wire_is_what_its_model_writes(http, org, db):
    """The database writes each entry's JSON: field for field and in order it must be LogEntry's,
    timestamps cut (not rounded) to the millisecond, nulls and awkward text included."""
    with db.session(write=True) as session:
        org_id = session.scalar(select(OrganizationRow.id).where(OrganizationRow.slug == org.slug))
        common = {"org_id": org_id, "delivery_id": "msg_1", "event_id": "evt_1", "channel_id": "ch_1"}
        rows = [
            DeliveryLogRow(
                **common,
                event_type="agent.error",
                channel_name='Ops "hook" \\ — 🚨',
                channel_kind="slack",
                attempt=3,
                status="failed",
                response_status=503,
                latency_ms=1234,
                error='HTTP 503: "busy"\nretry\tlater \x01',
                next_attempt_at=BASE + timedelta(minutes=5, microseconds=999_999),
                created_at=BASE + timedelta(seconds=59, microseconds=999_999),
            ),
            DeliveryLogRow(
                **common,
                event_type="deployment.complete",
                channel_name="Mail",
                channel_kind="email",
                attempt=1,
                status="sent",
                created_at=BASE + timedelta(microseconds=1_000),
            ),
            DeliveryLogRow(
                **common,
                event_type="agent.stale",
                channel_name="Hook",
                channel_kind="webhook",
                attempt=2,
                status="dead",
                error="",
                created_at=BASE,
            ),
        ]
        session.add_all(rows)
        session.flush()
        expected = [LogEntry.model_validate(row).model_dump(mode="json", by_alias=True) for row in rows]
    items = logs(http, org, {"orgSlug": org.slug})["items"]
    assert items == expected
    assert [list(item) for item in items] == [list(entry) for entry in expected]


@pytest.mark.parametrize(
    "encoding",
    [
        {
            "dateRange[start]": "{s}",
            "dateRange[end]": "{e}",
            "pagination[limit]": "3",
            "pagination[offset]": "2",
        },
        {"dateRange.start": "{s}", "dateRange.end": "{e}", "pagination.limit": "3", "pagination.offset": "2"},
        {"start": "{s}", "end": "{e}", "limit": "3", "offset": "2"},
        {"dateRange[start]": "{s}", "end": "{e}", "pagination.limit": "3", "offset": "2"},
    ],
    ids=["deepObject", "dotted", "flattened", "mixed"],
)
def test_every_encoding_of_date_range_and_pagination_means_the_same(http, org, db, encoding):
    seed_logs(db, org, 30)
    start, end = "2026-03-01T05:00:00Z", "2026-03-01T15:00:00Z"
    params = {key: value.format(s=start, e=end) for key, value in encoding.items()}
    answer = logs(http, org, {"orgSlug": org.slug, **params})
    # Hours 5..14 match (end exclusive): 10 rows; newest first, skipping two: hours 12, 11, 10.
    assert answer["total"] == 10
    assert [item["createdAt"][11:13] for item in answer["items"]] == ["12", "11", "10"]
    assert answer["limit"] == 3 and answer["offset"] == 2


def test_filters_combine(http, org, db):
    rows = seed_logs(db, org, 36)
    answer = logs(
        http, org, {"orgSlug": org.slug, "channelId": "ch_0", "status": "sent", "pagination[limit]": 100}
    )
    expected = [r for r in rows if r.channel_id == "ch_0" and r.status == "sent"]
    assert answer["total"] == len(expected) > 0
    assert {(i["channelId"], i["status"]) for i in answer["items"]} == {("ch_0", "sent")}
    by_type = logs(http, org, {"orgSlug": org.slug, "eventType": "agent.drifted", "limit": 100})
    assert by_type["total"] == sum(1 for r in rows if r.event_type == "agent.drifted")
    assert {i["eventType"] for i in by_type["items"]} == {"agent.drifted"}


def test_status_is_accepted_repeated_and_comma_separated(http, org, db):
    rows = seed_logs(db, org, 30)
    expected = sum(1 for r in rows if r.status in {"sent", "dead"})
    repeated = logs(http, org, [("orgSlug", org.slug), ("status", "sent"), ("status", "dead")])
    commas = logs(http, org, {"orgSlug": org.slug, "status": "sent,dead"})
    assert repeated["total"] == commas["total"] == expected


def test_cursor_walks_every_match_once(http, org, db):
    rows = seed_logs(db, org, 25)
    seen: list[str] = []
    params = {"orgSlug": org.slug, "limit": "7"}
    while True:
        answer = logs(http, org, params)
        seen.extend(item["id"] for item in answer["items"])
        if not answer["nextCursor"]:
            break
        params = {"orgSlug": org.slug, "limit": "7", "cursor": answer["nextCursor"]}
    assert len(seen) == len(set(seen)) == 25
    assert set(seen) == {r.id for r in rows}


def test_client_sends_deep_object_form(client, db, org):
    seed_logs(db, org, 10)
    page = client.notifications.logs(
        start=BASE + timedelta(hours=2),
        end=BASE + timedelta(hours=6),
        limit=2,
        offset=1,
        status=["sent", "failed"],
    )
    # Hours 2..5 are dead, sent, failed, dead: two match; newest first, skipping one: hour 3.
    assert page.total == 2
    assert [entry.created_at.hour for entry in page.items] == [3]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"pagination[limit]": "0"}, "pagination.limit"),
        ({"pagination[limit]": "1001"}, "pagination.limit"),
        ({"limit": "ten"}, "pagination.limit"),
        ({"pagination.offset": "-1"}, "pagination.offset"),
        ({"dateRange[start]": "yesterday"}, "dateRange.start"),
        ({"start": "2026-03-01T00:00:00"}, "dateRange.start"),
        ({"dateRange.start": "2026-03-02T00:00:00Z", "end": "2026-03-01T00:00:00Z"}, "dateRange"),
        ({"dateRange[begin]": "2026-03-01T00:00:00Z"}, "dateRange[begin]"),
        ({"limit": "5", "pagination[limit]": "5"}, "pagination.limit"),
        ({"status": "lost"}, "status.0"),
        ({"eventType": "deployment.failed"}, "eventType"),
        ({"cursor": "not-a-cursor"}, "cursor"),
        ({"page": "2"}, "page"),
    ],
)
def test_out_of_range_or_malformed_is_400_naming_it(http, org, params, field):
    response = http.get("notifications/logs", params={"orgSlug": org.slug, **params}, headers=org.headers)
    assert response.status_code == 400, response.text
    assert field in [detail["field"] for detail in response.json()["details"]]
    assert field in response.json()["message"]


def test_missing_org_slug_is_400(http, org):
    response = http.get("notifications/logs", headers=org.headers)
    assert response.status_code == 400
    assert response.json()["details"][0]["field"] == "orgSlug"


def test_logs_of_another_org_are_not_shown(http, org, other_org, db):
    seed_logs(db, org, 5)
    assert logs(http, other_org, {"orgSlug": other_org.slug})["total"] == 0


def test_openapi_documents_the_query_encodings(http):
    operation = http.get("openapi.json").json()["paths"]["/api/notifications/logs"]["get"]
    parameters = {p["name"]: p for p in operation["parameters"]}
    assert parameters["dateRange"]["style"] == "deepObject"
    assert parameters["pagination"]["schema"]["properties"]["limit"]["maximum"] == 1000
    assert {"start", "end", "limit", "offset", "status", "eventType", "channelId", "orgSlug"} <= set(
        parameters
    )
    assert "dotted form" in parameters["dateRange"]["description"]


# -- the delivery log's counts (charts) ---------------------------------------------------------


def add_logs(
    db: Database, org: Org, rows: list[tuple[Any, ...]], *, names: dict[str, str] | None = None
) -> None:
    """Attempts (time, channel id, status[, event type]) of the org, to webhook channels named by
    `names` or after their ids."""
    with db.session(write=True) as session:
        org_id = session.scalar(select(OrganizationRow.id).where(OrganizationRow.slug == org.slug))
        assert org_id is not None
        session.add_all(
            DeliveryLogRow(
                org_id=org_id,
                delivery_id=f"msg_{index}",
                event_id=f"evt_{index}",
                event_type=event_type[0] if event_type else "deployment.complete",
                channel_id=channel_id,
                channel_name=(names or {}).get(channel_id, f"Name of {channel_id}"),
                channel_kind="webhook",
                attempt=1,
                status=status,
                created_at=created_at,
            )
            for index, (created_at, channel_id, status, *event_type) in enumerate(rows)
        )


def test_log_stats_count_per_day_and_per_channel(client, db, org):
    midnight = datetime.combine(datetime.now(UTC).date(), datetime.min.time(), tzinfo=UTC)
    first = midnight - timedelta(days=2)  # the first instant of a three-day period
    add_logs(
        db,
        org,
        [
            (first - timedelta(microseconds=1), "ch_hook", "dead"),  # the day before: not counted
            (first, "ch_hook", "sent"),
            (first + timedelta(hours=23), "ch_hook", "failed"),
            (first + timedelta(hours=23, minutes=5), "ch_hook", "sent"),
            (midnight + timedelta(minutes=1), "ch_slack", "failed"),
            (midnight + timedelta(minutes=2), "ch_slack", "dead"),
            (midnight + timedelta(minutes=3), "ch_deleted", "sent"),
            (midnight + timedelta(days=1), "ch_hook", "sent"),  # tomorrow (a clock ahead): not counted
        ],
    )
    stats = client.notifications.log_stats(days=3)
    assert stats.days == 3
    assert stats.start == first
    assert [(d.day, d.sent, d.failed, d.dead) for d in stats.per_day] == [
        (first.date(), 2, 1, 0),
        (first.date() + timedelta(days=1), 0, 0, 0),
        (midnight.date(), 1, 1, 1),
    ]
    by_channel = [(c.channel_id, c.channel_name, c.sent, c.failed, c.dead) for c in stats.per_channel]
    assert by_channel == [
        ("ch_hook", "Name of ch_hook", 2, 1, 0),
        ("ch_slack", "Name of ch_slack", 0, 1, 1),
        ("ch_deleted", "Name of ch_deleted", 1, 0, 0),
    ]
    assert [round(c.failure_rate, 3) for c in stats.per_channel] == [0.333, 1.0, 0.0]


def test_log_stats_default_to_thirty_days_in_wire_form(http, org, db):
    add_logs(db, org, [(datetime.now(UTC) - timedelta(days=29), "ch_hook", "sent")])
    response = http.get("notifications/logs/stats", params={"orgSlug": org.slug}, headers=org.headers)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["days"] == 30 and len(answer["perDay"]) == 30
    assert answer["perDay"][0] == {"day": answer["perDay"][0]["day"], "sent": 1, "failed": 0, "dead": 0}
    assert answer["start"].endswith("T00:00:00.000Z")
    assert answer["perChannel"][0]["channelId"] == "ch_hook"
    assert answer["perChannel"][0]["failureRate"] == 0


@pytest.mark.parametrize("days", ["0", "366", "ten", "-1"])
def test_log_stats_days_out_of_range_is_400(http, org, days):
    params = {"orgSlug": org.slug, "days": days}
    response = http.get("notifications/logs/stats", params=params, headers=org.headers)
    assert response.status_code == 400, response.text
    assert response.json()["details"][0]["field"] == "days"


def test_log_stats_of_another_org_are_not_counted(client, db, org, other_org, server):
    add_logs(db, org, [(datetime.now(UTC), "ch_hook", "sent")])
    assert client.notifications.log_stats(days=1).per_day[0].sent == 1
    with OrgdeckClient(server.url, other_org.key, org_slug=other_org.slug) as theirs:
        stats = theirs.notifications.log_stats(days=1)
    assert [(d.sent, d.failed, d.dead) for d in stats.per_day] == [(0, 0, 0)]
    assert stats.per_channel == []


# -- demo data --------------------------------------------------------------------------------


def test_demo_channels_and_history_are_realistic_and_written_once(client, db, org, settings):
    seed_notifications(client, receiver_url="http://127.0.0.1:8081")
    # The next start's receiver listens on another port: the channels follow it, nothing doubles.
    seed_notifications(client, receiver_url="http://127.0.0.1:8082")
    channels = client.notifications.list_channels().items
    assert sorted(c.name for c in channels) == sorted(DEMO_CHANNELS)
    # Nothing the demo delivers can leave this machine.
    assert {urlsplit(c.config["url"]).hostname for c in channels} == {"127.0.0.1"}
    (webhook,) = [c for c in channels if c.kind == "webhook"]
    assert webhook.config["url"] == "http://127.0.0.1:8082" + DEMO_CHANNELS[webhook.name].path
    subscribed = {(s.channel_id, s.event_type) for s in client.notifications.list_subscriptions().items}
    assert len(subscribed) == sum(len(demo.event_types) for demo in DEMO_CHANNELS.values())

    schedule = settings.notification_retry_schedule
    cipher = cipher_for(settings)
    seed_delivery_history(db, org_slug=org.slug, retry_schedule=schedule, cipher=cipher)
    history = client.notifications.logs(limit=1000).items
    seed_delivery_history(db, org_slug=org.slug, retry_schedule=schedule, cipher=cipher)
    assert client.notifications.logs(limit=1000).total == len(history) > 100

    now = datetime.now(UTC)
    assert all(now - timedelta(days=30) < entry.created_at < now for entry in history)
    by_delivery: dict[str, list[str]] = {}
    for entry in sorted(history, key=lambda e: e.attempt):
        by_delivery.setdefault(entry.delivery_id, []).append(entry.status)
    outcomes = [statuses[-1] for statuses in by_delivery.values()]
    assert set(outcomes) == {"sent", "dead"} and outcomes.count("dead") == 1
    (dead,) = [statuses for statuses in by_delivery.values() if statuses[-1] == "dead"]
    assert dead == ["failed"] * (len(schedule) - 1) + ["dead"]
    assert any(statuses[-1] == "sent" and len(statuses) > 1 for statuses in by_delivery.values())
    assert {entry.channel_name for entry in history} == set(DEMO_CHANNELS)
    assert all(
        c.created_at < min(e.created_at for e in history) for c in client.notifications.list_channels().items
    )

    # The deliveries agree with their attempts, and say they are demo data.
    deliveries = client.notifications.deliveries(limit=1000)
    assert deliveries.total == len(by_delivery)
    assert sorted(d.status for d in deliveries.items) == sorted(outcomes)
    (dead_delivery,) = client.notifications.deliveries(status=["dead"]).items
    detail = client.notifications.delivery(dead_delivery.id)
    assert detail.event.payload["demo"] == DEMO_NOTE
    assert [a.status for a in detail.attempt_log] == dead
    assert detail.last_error == detail.attempt_log[-1].error and detail.last_response_status == 503
    assert detail.attempt_log[0].request_headers["webhook-id"] == dead_delivery.id
    assert detail.attempt_log[0].request_headers["webhook-signature"].startswith("v1,")

    # Finished deliveries and fanned-out events: nothing for a worker to pick up and send.
    with db.session() as session:
        org_id = session.scalar(select(OrganizationRow.id).where(OrganizationRow.slug == org.slug))
        waiting = select(func.count()).where(
            DeliveryRow.org_id == org_id, DeliveryRow.status.in_(["pending", "failed"])
        )
        assert session.scalar(waiting) == 0
        waiting = select(func.count()).where(EventRow.org_id == org_id, EventRow.fanned_out_at.is_(None))
        assert session.scalar(waiting) == 0


def test_the_demo_receiver_accepts_what_the_demo_sends(client):
    receiver = DemoReceiver().start()
    try:
        seed_notifications(client, receiver_url=receiver.url)
        for channel in client.notifications.list_channels().items:
            client.notifications.test_channel(channel.id)
        sent = wait_for(
            lambda: (page := client.notifications.deliveries(status=["sent"])).total == 2 and page.items,
            what="both demo channels' test deliveries sent",
        )
    finally:
        receiver.stop()
    for delivery in sent:
        (attempt,) = client.notifications.delivery(delivery.id).attempt_log
        assert (attempt.status, attempt.response_status) == ("sent", 200)
        assert json.loads(attempt.response_body or "") == {
            "received": True,
            "by": "the Orgdeck demo receiver",
        }


def test_channel_secrets_rotate_to_a_new_key(client, db, settings):
    created = client.notifications.create_channel("Rotated", "webhook", url=WEBHOOK_URL)
    rotated = client.notifications.rotate_secret(created.id)  # the previous secret still signs
    new_key = Fernet.generate_key().decode()
    service_keys = settings.encryption_keys
    with db.session(write=True) as session:
        assert rotate_channel_secrets(session, cipher=Cipher([new_key, *service_keys])) >= 2
    with db.session(write=True) as session:
        channel = session.get_one(ChannelRow, created.id)
        assert Cipher([new_key]).decrypt(channel.secret_encrypted or "") == rotated.signing_secret
        assert Cipher([new_key]).decrypt(channel.previous_secret_encrypted or "") == created.signing_secret
        # Back under the service's key, so that later tests on this database can still decrypt.
        rotate_channel_secrets(session, cipher=Cipher([*service_keys, new_key]))

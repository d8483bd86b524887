"""Deliveries as records: the list and its filters, a delivery's detail (what was sent, what came
back), resend, recover since a time, channels disabled and enabled (held deliveries), renamed and
given a new address, and signing-secret rotation with a grace period.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from api import OrgdeckClient
from api.errors import BadRequest, NotFound
from service.runtime.bootstrap import create_org_with_key
from tests.conftest import wait_for
from tests.deliveries.support import GRACE_SECONDS, attempts, emit

BIG_ANSWER = b"x" * 10_000


def test_a_delivery_shows_what_was_sent_and_what_came_back(service, tenant, receiver):
    notifications = tenant.client.notifications
    url = receiver.script(
        "/detailed", (500, {"X-Trace": "t-1"}, 0.0, BIG_ANSWER), (200, {}, 0.0, b'{"ok":true}')
    )
    channel = notifications.create_channel("Detailed", "webhook", url=url)
    notifications.subscribe(channel.id, "deployment.error")
    event_id = emit(service, tenant, "deployment.error", jobId="job_7", environment="production")

    (row,) = wait_for(lambda: notifications.deliveries(status=["sent"], channel_id=channel.id).items)
    assert (row.event_id, row.event_type, row.channel_name, row.attempts) == (
        event_id,
        "deployment.error",
        "Detailed",
        2,
    )
    assert (row.last_response_status, row.last_error, row.next_attempt_at) == (200, None, None)
    detail = notifications.delivery(row.id)
    first, second = receiver.at("/detailed")
    assert detail.event.id == event_id and detail.event.payload == {
        "jobId": "job_7",
        "environment": "production",
    }
    assert (detail.request.method, detail.request.destination) == ("POST", url)
    assert detail.request.body.encode() == first.body == second.body  # the same body on every attempt
    assert [(a.attempt, a.status, a.response_status) for a in detail.attempt_log] == [
        (1, "failed", 500),
        (2, "sent", 200),
    ]
    failed, sent = detail.attempt_log
    for attempt, request in zip(detail.attempt_log, (first, second), strict=True):
        shown = {name.lower(): value for name, value in attempt.request_headers.items()}
        for name in ("webhook-id", "webhook-timestamp", "webhook-signature", "content-type", "user-agent"):
            assert shown[name] == request.headers[name]
    assert failed.response_headers["x-trace"] == "t-1"
    assert failed.response_body == "x" * 4096  # the first 4 KiB
    assert failed.error and failed.error.startswith("HTTP 500: xxx")
    assert failed.latency_ms is not None and failed.next_attempt_at is not None
    assert sent.response_body == '{"ok":true}'
    secret = (channel.signing_secret or "").removeprefix("whsec_")
    assert secret and secret not in detail.model_dump_json()


def test_the_list_filters_and_pages_like_the_log(service, tenant, receiver, http_client):
    notifications = tenant.client.notifications
    good = notifications.create_channel("Good", "webhook", url=receiver.script("/listed-good", 200))
    bad = notifications.create_channel("Bad", "webhook", url=receiver.script("/listed-bad", 500))
    for channel in (good, bad):
        notifications.subscribe(channel.id, "agent.drifted")
    notifications.subscribe(good.id, "agent.stale")
    events = [emit(service, tenant, "agent.drifted", n=n) for n in range(3)]
    stale = emit(service, tenant, "agent.stale")
    wait_for(lambda: notifications.deliveries(status=["dead"]).total == 3, timeout=20, what="three dead")
    wait_for(lambda: notifications.deliveries(status=["sent"]).total == 4, what="four sent")

    everything = notifications.deliveries()
    assert everything.total == 7 and len(everything.items) == 7
    created = [(d.created_at, d.id) for d in everything.items]
    assert created == sorted(created, reverse=True)  # newest first
    assert {d.id for d in notifications.deliveries(channel_id=bad.id).items} == {
        d.id for d in everything.items if d.channel_id == bad.id
    }
    assert [d.event_id for d in notifications.deliveries(event_type="agent.stale").items] == [stale]
    assert {d.channel_id for d in notifications.deliveries(event_id=events[0]).items} == {good.id, bad.id}
    dead = notifications.deliveries(status=["dead"], channel_id=bad.id).items
    assert {(d.attempts, d.last_response_status) for d in dead} == {(3, 500)}
    assert notifications.deliveries(status=["dead", "sent"]).total == 7

    walked, cursor = [], None
    while True:
        page = notifications.deliveries(limit=3, cursor=cursor)
        walked += [d.id for d in page.items]
        if not page.next_cursor:
            break
        cursor = page.next_cursor
    assert walked == [d.id for d in everything.items]
    assert [d.id for d in notifications.deliveries(limit=3, offset=3).items] == walked[3:6]

    headers = {"X-API-Key": tenant.key}
    for params, field in (
        ({"status": "delivered"}, "status.0"),
        ({"pagination[limit]": "0"}, "pagination.limit"),
        ({"eventType": "deployment.failed"}, "eventType"),
        ({"colour": "red"}, "colour"),
    ):
        answer = http_client.get(
            "notifications/deliveries", params={"orgSlug": tenant.client.org_slug, **params}, headers=headers
        )
        assert answer.status_code == 400, answer.text
        assert field in [detail["field"] for detail in answer.json()["details"]]


def test_resend_sends_the_same_message_again(service, tenant, receiver):
    notifications = tenant.client.notifications
    channel = notifications.create_channel("Again", "webhook", url=receiver.script("/again", 200))
    first = notifications.test_channel(channel.id)
    wait_for(lambda: notifications.delivery(first.id).status == "sent", what="the first attempt")

    queued = notifications.resend(first.id)
    assert (queued.status, queued.attempts) == ("pending", 1)
    wait_for(lambda: notifications.delivery(first.id).status == "sent" and len(receiver.at("/again")) == 2)
    assert [r.headers["webhook-id"] for r in receiver.at("/again")] == [first.id, first.id]
    assert [(e.attempt, e.status) for e in attempts(tenant, channel.id)] == [(1, "sent"), (2, "sent")]


def test_resending_a_dead_delivery_gives_it_a_new_round_of_retries(service, tenant, receiver):
    notifications = tenant.client.notifications
    url = receiver.script("/revived", 500, 500, 500, 503, 200)
    channel = notifications.create_channel("Revived", "webhook", url=url)
    delivery = notifications.test_channel(channel.id)
    wait_for(lambda: notifications.delivery(delivery.id).status == "dead", timeout=20, what="dead")

    notifications.resend(delivery.id)
    wait_for(lambda: notifications.delivery(delivery.id).status == "sent", timeout=20, what="sent")
    logged = [(e.attempt, e.status, e.response_status) for e in attempts(tenant, channel.id)]
    assert logged == [
        (1, "failed", 500),
        (2, "failed", 500),
        (3, "dead", 500),
        (4, "failed", 503),
        (5, "sent", 200),
    ]


def test_recover_since_sends_an_outage_again(service, tenant, receiver):
    """Deliveries that failed or died while the receiver was down, from `since` on, are sent again
    at once when it is back; earlier ones are left as they are."""
    notifications = tenant.client.notifications
    url = receiver.script("/outage", 503)
    channel = notifications.create_channel("Outage", "webhook", url=url)
    notifications.subscribe(channel.id, "deployment.complete")
    before = emit(service, tenant, "deployment.complete", jobId="job_before")
    wait_for(lambda: notifications.deliveries(status=["dead"]).total == 1, timeout=20, what="the first dead")
    since = datetime.now(UTC)
    during = {emit(service, tenant, "deployment.complete", jobId=f"job_{n}") for n in range(3)}
    wait_for(lambda: notifications.deliveries(status=["dead"]).total == 4, timeout=20, what="all dead")

    receiver.script("/outage", 200)  # the receiver is back
    recovered = notifications.recover(channel.id, since)
    assert (recovered.recovered, recovered.channel_id) == (3, channel.id)
    sent = wait_for(lambda: (page := notifications.deliveries(status=["sent"])).total == 3 and page.items)
    assert {d.event_id for d in sent} == during
    assert all(d.attempts == 4 for d in sent)
    (still_dead,) = notifications.deliveries(status=["dead"]).items
    assert still_dead.event_id == before
    assert notifications.recover(channel.id, since).recovered == 0  # nothing left to recover


def test_a_disabled_channel_holds_its_deliveries_until_recovered(service, tenant, receiver):
    notifications = tenant.client.notifications
    channel = notifications.create_channel("Paused", "webhook", url=receiver.script("/paused", 200))
    notifications.subscribe(channel.id, "agent.error")
    since = datetime.now(UTC) - timedelta(seconds=1)
    disabled = notifications.update_channel(channel.id, enabled=False)
    assert disabled.state == "disabled" and "Disabled by key 'admin'" in (disabled.disabled_reason or "")
    held = {emit(service, tenant, "agent.error", stableKey=f"bot-{n}") for n in range(3)}
    wait_for(lambda: notifications.deliveries(status=["held"]).total == 3, what="three held")
    for refused in (
        lambda: notifications.recover(channel.id, since),
        lambda: notifications.resend(notifications.deliveries().items[0].id),
        lambda: notifications.test_channel(channel.id),
    ):
        with pytest.raises(BadRequest) as error:
            refused()
        assert error.value.code == "channel_disabled"

    assert notifications.update_channel(channel.id, enabled=True).state == "active"
    time.sleep(0.5)
    assert receiver.at("/paused") == []  # enabling alone sends nothing: held is kept until recovered
    assert notifications.deliveries(status=["held"]).total == 3
    assert notifications.recover(channel.id, since).recovered == 3
    sent = wait_for(lambda: (page := notifications.deliveries(status=["sent"])).total == 3 and page.items)
    assert {d.event_id for d in sent} == held and len(receiver.at("/paused")) == 3


def test_rotation_signs_with_both_secrets_during_the_grace_period_then_the_new_one(service, tenant, receiver):
    notifications = tenant.client.notifications
    channel = notifications.create_channel("Rotated", "webhook", url=receiver.script("/rotated", 200))
    old = channel.signing_secret or ""
    rotated = notifications.rotate_secret(channel.id)
    new = rotated.signing_secret or ""
    assert new.startswith("whsec_") and new != old
    assert rotated.previous_secret_expires_at is not None
    grace = (rotated.previous_secret_expires_at - datetime.now(UTC)).total_seconds()
    assert 0 < grace <= GRACE_SECONDS
    assert "whsec_" not in notifications.list_channels().model_dump_json()

    notifications.test_channel(channel.id)
    (during,) = wait_for(lambda: receiver.at("/rotated"), what="the delivery during the grace period")
    assert len(during.headers["webhook-signature"].split(" ")) == 2
    for secret in (old, new):
        Webhook(secret).verify(during.body, during.headers)

    time.sleep(max(0.0, (rotated.previous_secret_expires_at - datetime.now(UTC)).total_seconds()) + 0.2)
    notifications.test_channel(channel.id)
    after = wait_for(lambda: receiver.at("/rotated")[1:], what="the delivery after it")[0]
    assert len(after.headers["webhook-signature"].split(" ")) == 1
    Webhook(new).verify(after.body, after.headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(old).verify(after.body, after.headers)

    slack = notifications.create_channel("Chat", "slack", url="https://hooks.slack.com/services/T/B/x")
    with pytest.raises(BadRequest) as error:
        notifications.rotate_secret(slack.id)
    assert error.value.code == "not_a_webhook"


def test_a_channel_is_renamed_and_given_a_new_address(service, tenant, receiver):
    notifications = tenant.client.notifications
    channel = notifications.create_channel("Moving", "webhook", url=receiver.script("/old-home", 200))
    notifications.create_channel("Taken", "email", recipients=["ops@example.com"])
    moved = notifications.update_channel(channel.id, name="Moved", url=receiver.script("/new-home", 200))
    assert (moved.name, moved.config) == ("Moved", {"url": receiver.url + "/new-home"})
    notifications.test_channel(channel.id)
    (request,) = wait_for(lambda: receiver.at("/new-home"), what="the delivery to the new address")
    Webhook(channel.signing_secret or "").verify(request.body, request.headers)  # the same secret

    with pytest.raises(BadRequest) as error:
        notifications.update_channel(channel.id, name="Taken")
    assert error.value.code == "already_exists"
    with pytest.raises(BadRequest) as error:
        notifications.update_channel(channel.id, recipients=["ops@example.com"])
    assert error.value.details[0].field == "config.url"
    assert notifications.list_channels().items[0].name == "Moved"


def test_patch_refuses_null_and_unknown_fields(service, tenant, http_client):
    channel = tenant.client.notifications.create_channel("Strict", "email", recipients=["a@example.com"])
    headers = {"X-API-Key": tenant.key}
    for body, field in (
        ({"enabled": None}, "enabled"),
        ({"name": ""}, "name"),
        ({"colour": "red"}, "colour"),
        ({"enabled": "maybe"}, "enabled"),
    ):
        answer = http_client.patch(
            f"notifications/channels/{channel.id}",
            json={"orgSlug": tenant.client.org_slug, **body},
            headers=headers,
        )
        assert answer.status_code == 400, answer.text
        assert field in [detail["field"] for detail in answer.json()["details"]]
    (unchanged,) = tenant.client.notifications.list_channels().items
    assert (unchanged.name, unchanged.state) == ("Strict", "active")


def test_another_organizations_deliveries_and_channels_are_not_found(service, tenant, receiver):
    notifications = tenant.client.notifications
    channel = notifications.create_channel("Private", "webhook", url=receiver.script("/private", 200))
    delivery = notifications.test_channel(channel.id)
    slug, key = create_org_with_key(service.db, slug=f"o-{time.time_ns()}", name="Other", key_name="admin")
    with OrgdeckClient(service.url, key, org_slug=slug) as stranger:
        for call in (
            lambda: stranger.notifications.delivery(delivery.id),
            lambda: stranger.notifications.resend(delivery.id),
            lambda: stranger.notifications.recover(channel.id, datetime.now(UTC)),
            lambda: stranger.notifications.update_channel(channel.id, enabled=False),
            lambda: stranger.notifications.rotate_secret(channel.id),
        ):
            with pytest.raises(NotFound):
                call()
        assert stranger.notifications.deliveries().items == []
    assert notifications.list_channels().items[0].state == "active"


@pytest.fixture
def http_client(service):
    with httpx.Client(base_url=service.url + "/", timeout=30) as client:
        yield client

"""Sending deliveries to real receivers on loopback: signing, retries, 410, Retry-After, Slack, email
over SMTP, refused addresses; hanging receivers next to a healthy one; and what happens when a
worker stops mid-attempt, in a thread or as a killed process.
"""

from __future__ import annotations

import base64
import signal
import subprocess
import time
from datetime import timedelta
from email import message_from_bytes

import pytest
from cryptography.fernet import Fernet
from sqlalchemy import select
from standardwebhooks import Webhook

from api.errors import BadRequest
from service.events.service import record_event
from service.notifications.messages import Message
from service.notifications.models import ChannelRow, DeliveryRow
from service.notifications.queue import STOPPED, Claim
from service.notifications.sender import WAITING_PER_SLOT, Slots
from service.storage.crypto import Cipher
from service.storage.db import utcnow
from tests.conftest import wait_for
from tests.deliveries.support import (
    CHANNEL_SLOTS,
    CONSOLE_URL,
    RETRY_SCHEDULE,
    Received,
    attempts,
    deliveries_by_status,
    emit,
)


def verify_signature(request: Received, signing_secret: str) -> None:
    """The reference implementation of Standard Webhooks accepts the request (id, time, signature)."""
    Webhook(signing_secret).verify(request.body, request.headers)


def test_webhook_is_signed_and_keeps_its_id_across_retries(service, tenant, receiver):
    url = receiver.script("/flaky", 500, 200)
    channel = tenant.client.notifications.create_channel("Hook", "webhook", url=url)
    tenant.client.notifications.subscribe(channel.id, "deployment.error")
    tenant.client.notifications.subscribe(channel.id, "deployment.complete", enabled=False)
    emit(service, tenant, "deployment.complete", jobId="job_quiet")
    event_id = emit(service, tenant, "deployment.error", jobId="job_1", environment="production")

    requests = wait_for(
        lambda: len(receiver.at("/flaky")) >= 2 and receiver.at("/flaky"), what="two attempts"
    )
    assert len(requests) == 2  # the disabled subscription's event was not delivered
    first, second = requests
    for request in requests:
        verify_signature(request, channel.signing_secret or "")
        assert request.json()["type"] == "deployment.error"
        assert request.json()["data"] == {
            "eventId": event_id,
            "orgSlug": tenant.client.org_slug,
            "jobId": "job_1",
            "environment": "production",
        }
    assert first.headers["webhook-id"] == second.headers["webhook-id"]
    assert first.headers["webhook-id"].startswith("msg_")
    entries = wait_for(lambda: len(attempts(tenant, channel.id)) == 2 and attempts(tenant, channel.id))
    assert [(e.status, e.attempt, e.response_status) for e in entries] == [
        ("failed", 1, 500),
        ("sent", 2, 200),
    ]
    assert {e.delivery_id for e in entries} == {first.headers["webhook-id"]}
    assert entries[1].latency_ms is not None


def test_failing_receiver_is_retried_on_schedule_then_dead(service, tenant, receiver):
    url = receiver.script("/down", 500)
    channel = tenant.client.notifications.create_channel("Down", "webhook", url=url)
    tenant.client.notifications.subscribe(channel.id, "agent.error")
    emit(service, tenant, "agent.error", stableKey="support-bot")

    entries = wait_for(lambda: len(attempts(tenant, channel.id)) == 3 and attempts(tenant, channel.id))
    assert [e.status for e in entries] == ["failed", "failed", "dead"]
    assert [e.attempt for e in entries] == [1, 2, 3]
    assert all(e.response_status == 500 and e.error and "HTTP 500" in e.error for e in entries)
    for entry, planned in zip(entries[:2], RETRY_SCHEDULE[1:], strict=True):
        assert entry.next_attempt_at is not None
        delay = (entry.next_attempt_at - entry.created_at).total_seconds()
        assert planned * 0.9 - 0.01 <= delay <= planned * 1.1 + 0.01  # the schedule with ±10 % jitter
    assert entries[2].next_attempt_at is None
    times = [r.at for r in receiver.at("/down")]
    assert 0.85 <= times[1] - times[0] <= 1.8
    assert 1.75 <= times[2] - times[1] <= 2.8
    time.sleep(1.5)
    assert len(receiver.at("/down")) == 3  # dead means no more attempts


def test_gone_disables_the_channel_and_holds_what_comes_after(service, tenant, receiver):
    url = receiver.script("/gone", 410)
    channel = tenant.client.notifications.create_channel("Gone", "webhook", url=url)
    tenant.client.notifications.subscribe(channel.id, "deployment.partial")
    emit(service, tenant, "deployment.partial", jobId="job_2")

    entries = wait_for(lambda: attempts(tenant, channel.id), what="the attempt")
    assert [(e.status, e.response_status) for e in entries] == [("dead", 410)]
    (listed,) = tenant.client.notifications.list_channels().items
    assert listed.state == "disabled"
    assert listed.disabled_reason and "410" in listed.disabled_reason
    emit(service, tenant, "deployment.partial", jobId="job_3")
    later = wait_for(
        lambda: tenant.client.notifications.deliveries(status=["held"]).items, what="the next one held"
    )
    assert [d.channel_id for d in later] == [channel.id]
    with pytest.raises(BadRequest) as refused:
        tenant.client.notifications.test_channel(channel.id)
    assert refused.value.code == "channel_disabled"
    time.sleep(0.5)
    assert len(receiver.at("/gone")) == 1 and len(attempts(tenant, channel.id)) == 1


def test_retry_after_is_honoured(service, tenant, receiver):
    url = receiver.script("/busy", (503, {"Retry-After": "3"}), 200)
    channel = tenant.client.notifications.create_channel("Busy", "webhook", url=url)
    tenant.client.notifications.test_channel(channel.id)

    entries = wait_for(lambda: len(attempts(tenant, channel.id)) == 2 and attempts(tenant, channel.id))
    assert [e.status for e in entries] == ["failed", "sent"]
    assert entries[0].next_attempt_at is not None
    assert (entries[0].next_attempt_at - entries[0].created_at).total_seconds() >= 3
    first, second = receiver.at("/busy")
    assert second.at - first.at >= 2.9  # the schedule alone would have retried after 1 s


def test_slack_message_is_readable_and_links_to_the_console(service, tenant, receiver):
    url = receiver.script("/services/T1/B1/secret", 200)
    channel = tenant.client.notifications.create_channel("Slack", "slack", url=url)
    tenant.client.notifications.subscribe(channel.id, "deployment.error")
    emit(service, tenant, "deployment.error", jobId="job_9", environment="production", agents=["support-bot"])

    (request,) = wait_for(lambda: receiver.at("/services/T1/B1/secret"), what="the Slack message")
    message = request.json()
    assert set(message) == {"text", "blocks"}
    slug = tenant.client.org_slug
    assert message["text"] == f"[{slug}] Deployment failed: production, agent support-bot, job job_9"
    assert [block["type"] for block in message["blocks"]] == ["section", "context"]
    assert message["blocks"][0]["text"]["type"] == "mrkdwn"
    assert f"<{CONSOLE_URL}/deployments|Open in Orgdeck>" in message["blocks"][1]["elements"][0]["text"]
    assert "webhook-signature" not in request.headers
    assert wait_for(lambda: attempts(tenant, channel.id))[0].status == "sent"


def test_email_is_sent_over_smtp_as_text_and_html(service, tenant, inbox):
    handler, _port = inbox
    channel = tenant.client.notifications.create_channel(
        "Mail", "email", recipients=["ops@example.com", "lead@example.com"]
    )
    before = len(handler.messages)
    tenant.client.notifications.test_channel(channel.id, event_type="agent.drifted")

    wait_for(lambda: len(handler.messages) > before, what="the email")
    recipients, raw = handler.messages[before]
    assert sorted(recipients) == ["lead@example.com", "ops@example.com"]
    message = message_from_bytes(raw)
    assert message["Subject"].startswith("[Orgdeck] Agent drifted")
    assert message.get_content_type() == "multipart/alternative"
    leaves = [part for part in message.walk() if not part.is_multipart()]
    parts = {part.get_content_type(): part.get_payload(decode=True).decode() for part in leaves}
    assert "Agent drifted" in parts["text/plain"] and tenant.client.org_slug in parts["text/plain"]
    assert "<h2>Agent drifted" in parts["text/html"]
    entries = wait_for(lambda: attempts(tenant, channel.id))
    assert entries[0].status == "sent" and entries[0].channel_kind == "email"


def test_deleting_a_channel_keeps_its_logs(service, tenant, receiver):
    url = receiver.script("/kept", 200)
    channel = tenant.client.notifications.create_channel("Kept", "webhook", url=url)
    tenant.client.notifications.subscribe(channel.id, "agent.stale")
    tenant.client.notifications.test_channel(channel.id)
    wait_for(lambda: attempts(tenant, channel.id), what="the attempt")

    tenant.client.notifications.delete_channel(channel.id)
    assert tenant.client.notifications.list_subscriptions().items == []
    (entry,) = attempts(tenant, channel.id)
    assert (entry.channel_id, entry.channel_name, entry.status) == (channel.id, "Kept", "sent")


def test_a_channel_whose_secret_cannot_be_decrypted_does_not_stop_the_others(service, tenant, receiver):
    locked = tenant.client.notifications.create_channel(
        "Locked", "webhook", url=receiver.script("/locked", 200)
    )
    healthy = tenant.client.notifications.create_channel(
        "Healthy", "webhook", url=receiver.script("/healthy", 200)
    )
    with service.db.session(write=True) as session:  # as if written under a key since removed
        session.get_one(ChannelRow, locked.id).secret_encrypted = Cipher(
            [Fernet.generate_key().decode()]
        ).encrypt("whsec_" + base64.b64encode(b"k" * 24).decode())
    tenant.client.notifications.test_channel(locked.id)
    tenant.client.notifications.test_channel(healthy.id)

    assert (
        wait_for(lambda: attempts(tenant, healthy.id), what="the healthy channel's attempt")[0].status
        == "sent"
    )
    (entry, *_) = wait_for(lambda: attempts(tenant, locked.id), what="the locked channel's attempt")
    assert entry.status == "failed"
    assert entry.error and "ORGDECK_ENCRYPTION_KEYS" in entry.error
    assert receiver.at("/locked") == []


def test_a_refused_address_is_dead_at_once_with_the_reason(service, tenant):
    """127.0.0.2 is loopback, and only 127.0.0.1 is allowed: retrying for a day would not help."""
    channel = tenant.client.notifications.create_channel("Private", "webhook", url="http://127.0.0.2:9/hook")
    delivery = tenant.client.notifications.test_channel(channel.id)

    (entry,) = wait_for(lambda: attempts(tenant, channel.id), what="the attempt")
    assert (entry.status, entry.attempt, entry.next_attempt_at) == ("dead", 1, None)
    assert entry.error and entry.error.startswith("Refused:")
    assert "non-public address 127.0.0.2" in entry.error and "ORGDECK_OUTBOUND_ALLOW_PRIVATE" in entry.error
    dead = tenant.client.notifications.delivery(delivery.id)
    assert (dead.status, dead.attempts, dead.last_error) == ("dead", 1, entry.error)
    time.sleep(1.5)  # longer than the schedule's next delay
    assert len(attempts(tenant, channel.id)) == 1


def test_hanging_receivers_do_not_hold_back_a_healthy_one(service, tenant, receiver, hanging):
    """Six channels whose receiver takes requests and never answers, next to a healthy one: each
    stuck channel holds its own two slots, and every healthy delivery arrives while all of the
    stuck attempts are still waiting (the first of them ends only at the 8 s timeout)."""
    notifications = tenant.client.notifications
    stuck = [
        notifications.create_channel(f"Stuck {n}", "webhook", url=f"{hanging.url}/stuck/{n}")
        for n in range(6)
    ]
    healthy = notifications.create_channel("Healthy", "webhook", url=receiver.script("/beside-stuck", 200))
    for channel in [*stuck, healthy]:
        notifications.subscribe(channel.id, "deployment.complete")
    for n in range(10):
        emit(service, tenant, "deployment.complete", jobId=f"job_{n}")

    wait_for(lambda: len(receiver.at("/beside-stuck")) == 10, what="the healthy channel's ten deliveries")
    wait_for(lambda: hanging.holding() == 6 * CHANNEL_SLOTS, what="every stuck channel's slots in use")
    assert {path: hanging.most[path] for path in hanging.most} == {
        f"/stuck/{n}": CHANNEL_SLOTS for n in range(6)
    }
    sent = wait_for(lambda: len(attempts(tenant, healthy.id)) == 10 and attempts(tenant, healthy.id))
    assert {(e.status, e.attempt) for e in sent} == {("sent", 1)}
    for channel in stuck:
        assert attempts(tenant, channel.id) == [], "a stuck attempt ended before the healthy ones arrived"
    for channel in stuck:  # their attempts in flight are then simply not recorded
        notifications.delete_channel(channel.id)


def _claim(channel_id: str, n: int) -> Claim:
    message = Message(f"msg_{n}", f"evt_{n}", "agent.stale", utcnow(), "org", {}, "webhook", {"url": ""})
    return Claim(f"msg_{channel_id}_{n}", "org_1", "lease_1", 1, 0, channel_id, channel_id, message, ("s",))


def test_slots_bound_each_channel_and_the_whole():
    """Two slots a channel (and WAITING_PER_SLOT claims waiting per slot), three slots in all, given
    out in turn; a channel whose attempt got no answer has one slot and nothing waiting until one gets
    an answer."""
    slots = Slots(total=3, per_channel=2)
    room = 2 * (1 + WAITING_PER_SLOT)
    assert slots.fresh_room == room
    for n in range(room):
        slots.wait(_claim("a", n))
    assert (slots.room(), slots.busy()) == ({"a": 0}, ["a"])
    assert [c.delivery_id for c in slots.startable()] == ["msg_a_0", "msg_a_1"]
    assert slots.startable() == []  # both of its slots are in use
    for n in range(2):
        slots.wait(_claim("b", n))
    assert [c.delivery_id for c in slots.startable()] == ["msg_b_0"]  # the third and last slot
    assert slots.room_total() == 3 * (1 + WAITING_PER_SLOT) - (room + 2)
    slots.release("a", answered=False)
    assert [c.delivery_id for c in slots.startable()] == ["msg_b_1"]  # "a" is down to one slot
    assert slots.room()["a"] == 0 and "a" in slots.busy()
    slots.release("b", answered=True)
    slots.release("a", answered=True)
    assert [c.delivery_id for c in slots.startable()] == ["msg_a_2", "msg_a_3"]
    assert slots.room() == {"a": 2, "b": room - 1}


def test_attempts_left_unfinished_by_a_stopped_worker_are_logged_then_sent(service, tenant, receiver):
    """Deliveries claimed by a worker that stopped (their lease running out): the next claim logs
    each cut-short attempt as failed, saying so, then sends it again."""
    url = receiver.script("/resumed", 200)
    channel = tenant.client.notifications.create_channel("Resumed", "webhook", url=url)
    with service.db.session(write=True) as session:
        for index in range(5):
            event = record_event(session, org_id=tenant.org_id, type="agent.stale", payload={"n": index})
            event.fanned_out_at = utcnow()
            session.add(
                DeliveryRow(
                    org_id=tenant.org_id,
                    event_id=event.id,
                    event_type=event.type,
                    channel_id=channel.id,
                    next_attempt_at=utcnow(),
                    lease_token="held-by-a-worker-that-died",
                    lease_expires_at=utcnow() + timedelta(seconds=1.5),
                )
            )
    time.sleep(0.7)
    assert receiver.at("/resumed") == []  # the lease still holds them
    wait_for(lambda: deliveries_by_status(service, tenant.org_id) == {"sent": 5}, what="all five sent")
    assert len({r.headers["webhook-id"] for r in receiver.at("/resumed")}) == 5
    entries = attempts(tenant, channel.id)
    assert sorted((e.attempt, e.status) for e in entries) == [(1, "failed")] * 5 + [(2, "sent")] * 5
    assert {e.error for e in entries if e.status == "failed"} == {STOPPED}


def test_killing_a_worker_process_mid_send_loses_nothing(service, tenant, receiver):
    """A `python -m service worker` process is SIGKILLed with twelve attempts held by receivers (and
    the rest of its claims waiting for a slot); a new worker process logs each claim it left as an
    attempt whose outcome is unknown, sends it again, and ends every delivery `sent` or `dead`.
    The twelve that were in flight reach their receiver twice (at least once): counted."""
    notifications = tenant.client.notifications
    stalling = [
        notifications.create_channel(
            f"Stalls {n}", "webhook", url=receiver.script(f"/stalls/{n}", (200, {}, 3.0), (200, {}, 3.0), 200)
        )
        for n in range(6)
    ]
    refusing = notifications.create_channel("Refuses", "webhook", url=receiver.script("/refuses", 500))
    for channel in [*stalling, refusing]:
        notifications.subscribe(channel.id, "deployment.complete")
    stalled_paths = [f"/stalls/{n}" for n in range(6)]
    service.stop_worker()
    try:
        killed = service.worker_process()
        try:
            event_ids = {emit(service, tenant, "deployment.complete", jobId=f"job_{n}") for n in range(5)}
            held = 6 * CHANNEL_SLOTS
            wait_for(
                lambda: sum(len(receiver.at(path)) for path in stalled_paths) >= held,
                timeout=30,
                what="the worker process to have twelve attempts held",
            )
            killed.send_signal(signal.SIGKILL)
            killed.wait(timeout=10)
        finally:
            _stop(killed)
        assert sum(len(receiver.at(path)) for path in stalled_paths) == held  # killed while held
        restarted = service.worker_process()
        try:
            wait_for(
                lambda: deliveries_by_status(service, tenant.org_id) == {"sent": 30, "dead": 5},
                timeout=60,
                what="every delivery sent or dead",
            )
        finally:
            _stop(restarted)
    finally:
        service.restart_worker()

    with service.db.session() as session:
        deliveries = session.execute(
            select(DeliveryRow.event_id, DeliveryRow.channel_id).where(DeliveryRow.org_id == tenant.org_id)
        ).all()
    assert sorted(deliveries) == sorted((e, c.id) for e in event_ids for c in [*stalling, refusing])
    cut_short = 0
    for channel in stalling:
        by_delivery: dict[str, list[tuple[int, str, str | None]]] = {}
        for entry in attempts(tenant, channel.id):
            by_delivery.setdefault(entry.delivery_id, []).append((entry.attempt, entry.status, entry.error))
        assert len(by_delivery) == 5
        for logged in by_delivery.values():
            assert logged in ([(1, "sent", None)], [(1, "failed", STOPPED), (2, "sent", None)])
            cut_short += len(logged) == 2
    assert cut_short >= held  # the twelve in flight, and those waiting for their slots
    for entry in attempts(tenant, refusing.id):
        assert entry.error == STOPPED or entry.response_status == 500
    received = [r.headers["webhook-id"] for path in stalled_paths for r in receiver.at(path)]
    duplicates = len(received) - len(set(received))
    assert len(set(received)) == 30 and duplicates == held
    print(
        f"\nkilled with {held} attempts in flight and {cut_short - held} claims waiting: {cut_short} "
        f"logged as cut short, {duplicates} messages arrived twice, none lost"
    )


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.kill()
        process.wait(timeout=10)

"""Delivery of events to real receivers on loopback: signing, retries, 410, Retry-After, Slack,
email over SMTP, and recovery when the worker is killed mid-send.

The module has a database and a service of its own, with a retry schedule in seconds and the
worker in a thread the tests can stop, so timings are exact and a worker process can be killed.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from email import message_from_bytes
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from cryptography.fernet import Fernet
from sqlalchemy import func, select

from api import OrgdeckClient
from service.bootstrap import create_org_with_key
from service.crypto import Cipher
from service.db import Database, utcnow
from service.events.service import record_event
from service.migrate import upgrade
from service.notifications.models import Channel, Delivery
from service.orgs.models import Organization
from service.server import ServerThread
from service.settings import Settings
from service.worker import Worker, start_in_thread
from tests.conftest import ROOT, make_settings, scratch_database

RETRY_SCHEDULE = [0.0, 1.0, 2.0]
LEASE_SECONDS = 2.0
CONSOLE_URL = "http://console.example"


# -- receivers on loopback ----------------------------------------------------------------


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Receiver:
    """An HTTP endpoint answering each path with a scripted sequence (the last answer repeats)."""

    url: str = ""
    requests: list[Received] = field(default_factory=list)
    scripts: dict[str, list[tuple[int, dict[str, str], float]]] = field(default_factory=dict)

    def script(
        self, path: str, *answers: int | tuple[int, dict[str, str]] | tuple[int, dict[str, str], float]
    ) -> str:
        """Answer `path` with statuses (or (status, headers[, delay])) in turn; return its URL."""
        self.scripts[path] = [
            (a, {}, 0.0) if isinstance(a, int) else (a[0], a[1], a[2] if len(a) > 2 else 0.0) for a in answers
        ]
        return self.url + path

    def at(self, path: str) -> list[Received]:
        return [r for r in self.requests if r.path == path]


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            headers = {k.lower(): v for k, v in self.headers.items()}
            receiver.requests.append(Received(self.path, headers, body, time.monotonic()))
            script = receiver.scripts.get(self.path, [(200, {}, 0.0)])
            status, extra, delay = script.pop(0) if len(script) > 1 else script[0]
            time.sleep(delay)
            try:
                self.send_response(status)
                for name, value in extra.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")
            except (BrokenPipeError, ConnectionResetError):
                pass  # the sender was killed while this answer was held back, as intended

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    found = Receiver()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(found))
    server.daemon_threads = True
    found.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield found
    server.shutdown()
    server.server_close()


class Inbox:
    def __init__(self) -> None:
        self.messages: list[tuple[list[str], bytes]] = []

    async def handle_DATA(self, _server: Any, _session: Any, envelope: Any) -> str:  # noqa: N802 - aiosmtpd's name
        self.messages.append((list(envelope.rcpt_tos), envelope.content))
        return "250 OK"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def inbox() -> Iterator[tuple[Inbox, int]]:
    handler, port = Inbox(), _free_port()
    controller = Controller(handler, hostname="127.0.0.1", port=port)
    controller.start()
    yield handler, port
    controller.stop()


# -- a service of this module's own ---------------------------------------------------------


@dataclass
class Service:
    db: Database
    settings: Settings
    url: str
    worker: Worker
    worker_thread: threading.Thread

    def restart_worker(self) -> None:
        self.worker, self.worker_thread = start_in_thread(self.db, self.settings)

    def stop_worker(self) -> None:
        self.worker.stop()
        self.worker_thread.join(timeout=20)


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory, inbox: tuple[Inbox, int]) -> Iterator[Service]:
    with scratch_database(tmp_path_factory.mktemp("notifications-db")) as database_url:
        settings = make_settings(
            tmp_path_factory.mktemp("notifications-data"),
            database_url,
            run_worker=False,
            worker_idle_seconds=0.05,
            notification_retry_schedule=RETRY_SCHEDULE,
            notification_lease_seconds=LEASE_SECONDS,
            smtp_host="127.0.0.1",
            smtp_port=inbox[1],
            console_url=CONSOLE_URL,
        )
        db = Database(settings.resolved_database_url)
        upgrade(db)
        server = ServerThread(settings).start()
        worker, thread = start_in_thread(db, settings)
        running = Service(db=db, settings=settings, url=server.url, worker=worker, worker_thread=thread)
        yield running
        running.stop_worker()
        server.stop()
        db.dispose()


@dataclass
class Tenant:
    client: OrgdeckClient
    org_id: str


@pytest.fixture
def tenant(service: Service) -> Iterator[Tenant]:
    slug, key = create_org_with_key(service.db, slug=f"n-{uuid.uuid4().hex[:12]}", name="N", key_name="admin")
    with service.db.session() as session:
        org_id = session.scalar(select(Organization.id).where(Organization.slug == slug))
    assert org_id is not None
    with OrgdeckClient(service.url, key, org_slug=slug) as client:
        yield Tenant(client=client, org_id=org_id)


def emit(service: Service, tenant: Tenant, event_type: str, **payload: Any) -> str:
    with service.db.session(write=True) as session:
        return record_event(session, org_id=tenant.org_id, type=event_type, payload=payload).id


def wait_for(condition: Callable[[], Any], timeout: float = 15, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def attempts(tenant: Tenant, channel_id: str) -> list[Any]:
    """The channel's log entries, oldest first."""
    return list(reversed(tenant.client.notifications.logs(channel_id=channel_id, limit=100).items))


def verify_signature(request: Received, signing_secret: str) -> None:
    key = base64.b64decode(signing_secret.removeprefix("whsec_"))
    signed = (
        f"{request.headers['webhook-id']}.{request.headers['webhook-timestamp']}.".encode() + request.body
    )
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    assert request.headers["webhook-signature"] == f"v1,{expected}"
    assert abs(int(request.headers["webhook-timestamp"]) - time.time()) < 30


# -- tests ------------------------------------------------------------------------------------


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


def test_gone_disables_the_channel(service, tenant, receiver):
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
    test = tenant.client.notifications.test_channel(channel.id)
    entries = wait_for(lambda: len(attempts(tenant, channel.id)) == 2 and attempts(tenant, channel.id))
    assert entries[1].event_id == test.event_id
    assert entries[1].status == "dead" and "disabled" in (entries[1].error or "")
    assert len(receiver.at("/gone")) == 1


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
        session.get_one(Channel, locked.id).secret_encrypted = Cipher(
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


def _deliveries_by_status(service: Service, org_id: str) -> dict[str, int]:
    with service.db.session() as session:
        rows = session.execute(
            select(Delivery.status, func.count()).where(Delivery.org_id == org_id).group_by(Delivery.status)
        )
        return dict(rows.all())


def test_delivery_claimed_by_a_dead_worker_is_resumed_when_its_lease_expires(service, tenant, receiver):
    url = receiver.script("/resumed", 200)
    channel = tenant.client.notifications.create_channel("Resumed", "webhook", url=url)
    with service.db.session(write=True) as session:
        for index in range(5):
            event = record_event(session, org_id=tenant.org_id, type="agent.stale", payload={"n": index})
            event.fanned_out_at = utcnow()
            session.add(
                Delivery(
                    org_id=tenant.org_id,
                    event_id=event.id,
                    channel_id=channel.id,
                    lease_token="held-by-a-worker-that-died",
                    lease_expires_at=utcnow() + timedelta(seconds=1.5),
                )
            )
    time.sleep(0.7)
    assert receiver.at("/resumed") == []  # the lease still holds them
    wait_for(lambda: _deliveries_by_status(service, tenant.org_id) == {"sent": 5}, what="all five sent")
    assert len({r.headers["webhook-id"] for r in receiver.at("/resumed")}) == 5
    assert [e.status for e in attempts(tenant, channel.id)] == ["sent"] * 5


def test_killing_the_worker_process_mid_send_loses_nothing(service, tenant, receiver):
    """A worker process is SIGKILLed while a receiver holds its request; a new worker process ends
    every delivery `sent` or `dead`, and the count of deliveries and attempts adds up."""
    stalling = tenant.client.notifications.create_channel(
        "Stalls", "webhook", url=receiver.script("/stalls", (200, {}, 3.0), 200)
    )
    refusing = tenant.client.notifications.create_channel(
        "Refuses", "webhook", url=receiver.script("/refuses", 500)
    )
    for channel in (stalling, refusing):
        tenant.client.notifications.subscribe(channel.id, "deployment.complete")
    service.stop_worker()
    try:
        killed = _worker_process(service.settings)
        try:
            event_ids = {emit(service, tenant, "deployment.complete", jobId=f"job_{n}") for n in range(4)}
            wait_for(lambda: receiver.at("/stalls"), timeout=30, what="the worker process to start sending")
            killed.send_signal(signal.SIGKILL)
            killed.wait(timeout=10)
        finally:
            _stop(killed)
        assert len(receiver.at("/stalls")) == 1  # the kill landed while that request was held
        restarted = _worker_process(service.settings)
        try:
            wait_for(
                lambda: _deliveries_by_status(service, tenant.org_id) == {"sent": 4, "dead": 4},
                timeout=30,
                what="every delivery sent or dead",
            )
        finally:
            _stop(restarted)
    finally:
        service.restart_worker()

    with service.db.session() as session:
        deliveries = session.execute(
            select(Delivery.event_id, Delivery.channel_id).where(Delivery.org_id == tenant.org_id)
        ).all()
    assert sorted(deliveries) == sorted((e, c.id) for e in event_ids for c in (stalling, refusing))
    # One attempt per stalled delivery: the killed one left no log row and was redone.
    assert [e.status for e in attempts(tenant, stalling.id)] == ["sent"] * 4
    refused = attempts(tenant, refusing.id)
    assert sorted(e.status for e in refused) == ["dead"] * 4 + ["failed"] * 8
    assert len({e.delivery_id for e in refused}) == 4
    stalled_requests = receiver.at("/stalls")
    assert len({r.headers["webhook-id"] for r in stalled_requests}) == 4
    assert len(stalled_requests) == 5  # at least once: the interrupted one arrived twice


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.kill()
        process.wait(timeout=10)


def _worker_process(settings: Settings) -> subprocess.Popen[bytes]:
    environment = {
        **os.environ,
        "ORGDECK_DATA_DIR": str(settings.data_dir),
        "ORGDECK_DATABASE_URL": settings.resolved_database_url,
        "ORGDECK_ENCRYPTION_KEYS": ",".join(settings.encryption_keys),
        "ORGDECK_OUTBOUND_ALLOW_PRIVATE": "*",
        "ORGDECK_WORKER_IDLE_SECONDS": "0.05",
        "ORGDECK_NOTIFICATION_RETRY_SCHEDULE": ",".join(str(s) for s in RETRY_SCHEDULE),
        "ORGDECK_NOTIFICATION_LEASE_SECONDS": str(LEASE_SECONDS),
    }
    return subprocess.Popen([sys.executable, "-m", "service", "worker"], cwd=Path(ROOT), env=environment)

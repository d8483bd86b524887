"""What the delivery tests share. A service of their own: a retry schedule in seconds, short leases
and grace periods, two slots per channel, and the worker in a thread the tests can stop (so that a
worker process can be started and killed instead). Receivers are real servers on loopback: one
answering as scripted, one that takes requests and never answers, and an SMTP server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from sqlalchemy import func, select

from api import OrgdeckClient
from api.notifications import LogEntry
from service.events.service import record_event
from service.notifications.models import DeliveryRow
from service.orgs.models import OrganizationRow
from service.runtime.bootstrap import create_org_with_key
from service.runtime.server import ServerThread
from service.settings import Settings
from service.storage.db import Database
from service.storage.migrate import upgrade
from service.worker import WorkerThread, start_in_thread
from tests.conftest import make_settings, scratch_database
from tests.processes import ROOT, free_port

RETRY_SCHEDULE = [0.0, 1.0, 2.0]
LEASE_SECONDS = 2.0
GRACE_SECONDS = 3.0
TIMEOUT_SECONDS = 8.0
CHANNEL_SLOTS = 2
TOTAL_SLOTS = 32
CONSOLE_URL = "http://console.example"
# Receivers listen on 127.0.0.1, the one private address this service may call.
ALLOWED = "127.0.0.1"


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
    scripts: dict[str, list[tuple[int, dict[str, str], float, bytes]]] = field(default_factory=dict)

    def script(self, path: str, *answers: int | tuple[Any, ...]) -> str:
        """Answer `path` with statuses, or (status, headers[, delay[, body]]), in turn; return its URL."""
        self.scripts[path] = [_answer(*((a,) if isinstance(a, int) else a)) for a in answers]
        return self.url + path

    def at(self, path: str) -> list[Received]:
        return [r for r in self.requests if r.path == path]


class Server(ThreadingHTTPServer):
    """A threaded HTTP server that queues as many connections as a sender opens at once (the
    standard library's default of 5 resets the rest)."""

    daemon_threads = True
    request_queue_size = 128

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A sender killed mid-request resets its connection: expected here, not worth a traceback.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def _answer(
    status: int, headers: dict[str, str] | None = None, delay: float = 0.0, body: bytes = b"ok"
) -> tuple[int, dict[str, str], float, bytes]:
    return status, headers or {}, delay, body


def _scripted(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as a real receiver would

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            headers = {k.lower(): v for k, v in self.headers.items()}
            receiver.requests.append(Received(self.path, headers, body, time.monotonic()))
            script = receiver.scripts.get(self.path, [_answer(200)])
            status, extra, delay, answer = script.pop(0) if len(script) > 1 else script[0]
            time.sleep(delay)
            try:
                self.send_response(status)
                for name, value in extra.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the sender was killed while this answer was held back, as intended

        def log_message(self, *args: object) -> None:
            pass

    return Handler


class Hanging:
    """An HTTP endpoint that reads each request and never answers, until released; it counts the
    requests it holds per path, now and at most."""

    def __init__(self) -> None:
        self.open: Counter[str] = Counter()
        self.most: Counter[str] = Counter()
        self.released = threading.Event()
        self._lock = threading.Lock()
        hanging = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with hanging._lock:
                    hanging.open[self.path] += 1
                    hanging.most[self.path] = max(hanging.most[self.path], hanging.open[self.path])
                hanging.released.wait(60)
                with hanging._lock:
                    hanging.open[self.path] -= 1
                self.close_connection = True  # no answer: the connection just closes

            def log_message(self, *args: object) -> None:
                pass

        self.server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def holding(self) -> int:
        with self._lock:
            return sum(self.open.values())


def _serve(server: Server) -> threading.Thread:
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return thread


@pytest.fixture(scope="package")
def receiver() -> Iterator[Receiver]:
    found = Receiver()
    server = Server(("127.0.0.1", 0), _scripted(found))
    found.url = f"http://127.0.0.1:{server.server_address[1]}"
    _serve(server)
    yield found
    server.shutdown()
    server.server_close()


@pytest.fixture
def hanging() -> Iterator[Hanging]:
    endpoint = Hanging()
    _serve(endpoint.server)
    yield endpoint
    endpoint.released.set()
    endpoint.server.shutdown()
    endpoint.server.server_close()


class Inbox:
    def __init__(self) -> None:
        self.messages: list[tuple[list[str], bytes]] = []

    async def handle_DATA(self, _server: Any, _session: Any, envelope: Any) -> str:  # noqa: N802 - aiosmtpd's name
        self.messages.append((list(envelope.rcpt_tos), envelope.content))
        return "250 OK"


@pytest.fixture(scope="package")
def inbox() -> Iterator[tuple[Inbox, int]]:
    handler, port = Inbox(), free_port()
    controller = Controller(handler, hostname="127.0.0.1", port=port)
    controller.start()
    yield handler, port
    controller.stop()


# -- the service --------------------------------------------------------------------------------


@dataclass
class Service:
    db: Database
    settings: Settings
    url: str
    worker: WorkerThread

    def restart_worker(self) -> None:
        self.worker = start_in_thread(self.db, self.settings)

    def stop_worker(self) -> None:
        self.worker.stop()
        assert not self.worker.thread.is_alive(), "the worker did not stop"

    def worker_process(self) -> subprocess.Popen[bytes]:
        """`python -m service worker` on this service's database, with its settings."""
        settings = self.settings
        environment = {
            **os.environ,
            "ORGDECK_DATA_DIR": str(settings.data_dir),
            "ORGDECK_DATABASE_URL": settings.resolved_database_url,
            "ORGDECK_ENCRYPTION_KEYS": ",".join(settings.encryption_keys),
            "ORGDECK_OUTBOUND_ALLOW_PRIVATE": ",".join(settings.outbound_allow_private),
            "ORGDECK_WORKER_IDLE_SECONDS": str(settings.worker_idle_seconds),
            "ORGDECK_NOTIFICATION_POLL_SECONDS": str(settings.notification_poll_seconds),
            "ORGDECK_NOTIFICATION_RETRY_SCHEDULE": ",".join(str(s) for s in RETRY_SCHEDULE),
            "ORGDECK_NOTIFICATION_LEASE_SECONDS": str(LEASE_SECONDS),
            "ORGDECK_NOTIFICATION_TIMEOUT_SECONDS": str(TIMEOUT_SECONDS),
            "ORGDECK_NOTIFICATION_CHANNEL_CONCURRENCY": str(settings.notification_channel_concurrency),
        }
        return subprocess.Popen([sys.executable, "-m", "service", "worker"], cwd=ROOT, env=environment)


@pytest.fixture(scope="package")
def service(tmp_path_factory: pytest.TempPathFactory, inbox: tuple[Inbox, int]) -> Iterator[Service]:
    with scratch_database(tmp_path_factory.mktemp("deliveries-db")) as database_url:
        settings = make_settings(
            tmp_path_factory.mktemp("deliveries-data"),
            database_url,
            run_worker=False,
            outbound_allow_private=[ALLOWED],
            worker_idle_seconds=0.05,
            notification_poll_seconds=0.05,
            notification_retry_schedule=RETRY_SCHEDULE,
            notification_lease_seconds=LEASE_SECONDS,
            notification_timeout_seconds=TIMEOUT_SECONDS,
            notification_channel_concurrency=CHANNEL_SLOTS,
            notification_concurrency=TOTAL_SLOTS,
            notification_secret_grace_seconds=GRACE_SECONDS,
            smtp_host="127.0.0.1",
            smtp_port=inbox[1],
            console_url=CONSOLE_URL,
        )
        db = Database(settings.resolved_database_url)
        upgrade(db)
        server = ServerThread(settings).start()
        running = Service(db=db, settings=settings, url=server.url, worker=start_in_thread(db, settings))
        yield running
        running.stop_worker()
        server.stop()
        db.dispose()


@dataclass
class Tenant:
    client: OrgdeckClient
    org_id: str
    key: str


@pytest.fixture
def tenant(service: Service) -> Iterator[Tenant]:
    slug, key = create_org_with_key(service.db, slug=f"n-{uuid.uuid4().hex[:12]}", name="N", key_name="admin")
    with service.db.session() as session:
        org_id = session.scalar(select(OrganizationRow.id).where(OrganizationRow.slug == slug))
    assert org_id is not None
    with OrgdeckClient(service.url, key, org_slug=slug) as client:
        yield Tenant(client=client, org_id=org_id, key=key)


# -- helpers --------------------------------------------------------------------------------------


def emit(service: Service, tenant: Tenant, event_type: str, **payload: Any) -> str:
    with service.db.session(write=True) as session:
        return record_event(session, org_id=tenant.org_id, type=event_type, payload=payload).id


def attempts(tenant: Tenant, channel_id: str) -> list[LogEntry]:
    """The channel's log entries, oldest first."""
    return list(reversed(tenant.client.notifications.logs(channel_id=channel_id, limit=1000).items))


def deliveries_by_status(service: Service, org_id: str) -> dict[str, int]:
    with service.db.session() as session:
        rows = session.execute(
            select(DeliveryRow.status, func.count())
            .where(DeliveryRow.org_id == org_id)
            .group_by(DeliveryRow.status)
        )
        return dict(rows.all())

"""No credential reaches a log line, at any level, from any logger.

One run calls out in every way the service does (a webhook channel, a Slack incoming webhook, email
over SMTP with a login, an LLM provider, a deployment webhook), with a secret planted in each URL,
key and password, and succeeding and failing receivers; then every captured record, tracebacks
included, is searched for the secrets. Another logs what quotes a free-form configuration (a failing
statement's parameters, the object itself) and searches the lines for its credentials.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from api import OrgdeckClient
from service.redaction import logs as logredact
from service.runtime.bootstrap import create_org_with_key
from service.runtime.server import ServerThread
from service.storage.db import Database
from service.storage.migrate import upgrade
from tests.conftest import make_settings, scratch_database, wait_for
from tests.deliveries.support import Inbox, free_port
from tests.fake_llm import running_fake_llm
from tests.processes import http_peer
from tests.test_deployments import WebhookTarget, versioned_agent, wait_for_end

SECRETS = {
    name: f"{name}-{uuid.uuid4().hex}"
    for name in ("webhook", "slack", "smtp", "provider", "apikey", "deploy", "failing")
}


class Sink(BaseHTTPRequestHandler):
    """Answers 200, or 500 on a path with 'fail' in it; remembers the paths it saw."""

    seen: list[str] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        Sink.seen.append(self.path)
        self.send_response(500 if "fail" in self.path else 200)
        self.send_header("content-length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *_args: Any) -> None:
        pass


@pytest.fixture
def sink() -> Iterator[str]:
    with http_peer(Sink) as server:
        yield f"http://127.0.0.1:{server.server_address[1]}"


@pytest.fixture
def smtp() -> Iterator[tuple[Inbox, int]]:
    def authenticate(_server: Any, _session: Any, _envelope: Any, _mechanism: str, data: Any) -> AuthResult:
        ok = isinstance(data, LoginPassword) and data.password.decode() == SECRETS["smtp"]
        return AuthResult(success=ok)

    inbox, port = Inbox(), free_port()
    controller = Controller(
        inbox, hostname="127.0.0.1", port=port, authenticator=authenticate, auth_require_tls=False
    )
    controller.start()
    yield inbox, port
    controller.stop()


def test_no_secret_in_any_log_record(tmp_path, sink, smtp, caplog):
    """On a database of its own: no other worker of the suite may take these deliveries."""
    caplog.set_level(logging.DEBUG)
    overrides = {
        "smtp_host": "127.0.0.1",
        "smtp_port": smtp[1],
        "smtp_username": "orgdeck",
        "smtp_password": SECRETS["smtp"],
    }
    with scratch_database(tmp_path) as database_url, running_fake_llm() as llm:
        db = Database(database_url)
        upgrade(db)
        settings = make_settings(tmp_path, database_url, **overrides)
        server = ServerThread(settings).start()
        slug, key = create_org_with_key(db, slug=f"t-{uuid.uuid4().hex[:12]}", name="Logs", key_name="admin")
        with OrgdeckClient(server.url, key, org_slug=slug) as client:
            call_out_every_way(client, sink, llm.url)
            wait_for(lambda: len(Sink.seen) >= 3, what="the webhook, Slack and failing deliveries")
            wait_for(lambda: smtp[0].messages, what="the email, sent after logging in")
        server.stop()
        db.dispose()
    text = caplog.text + "\n".join(record.getMessage() for record in caplog.records)
    assert "HTTP Request: POST http://127.0.0.1" in text, "httpx logged no outbound call: nothing was checked"
    for name, secret in SECRETS.items():
        assert secret not in text, f"the {name} secret is in the logs"


def call_out_every_way(client: OrgdeckClient, sink: str, llm_url: str) -> None:
    webhook = client.notifications.create_channel(
        "hook", "webhook", url=f"{sink}/hook?token={SECRETS['webhook']}"
    )
    slack = client.notifications.create_channel(
        "slack", "slack", url=f"{sink}/services/T0/B0/{SECRETS['slack']}"
    )
    failing = client.notifications.create_channel(
        "failing", "webhook", url=f"{sink}/fail/{SECRETS['failing']}"
    )
    email = client.notifications.create_channel("mail", "email", recipients=["ops@example.com"])
    for channel in (webhook, slack, failing, email):
        client.notifications.test_channel(channel.id)
    provider = client.providers.create(
        "local",
        "openai_compatible",
        base_url=f"{llm_url}/{SECRETS['provider']}/v1",
        api_key=SECRETS["apikey"],
        models=["m"],
    )
    assert client.providers.test(provider.id).ok
    target = WebhookTarget()
    try:
        environment = client.environments.create(
            "edge", target="webhook", webhook_url=f"{target.url}/{SECRETS['deploy']}"
        )
        target.key = client.deployments.create_signing_key(environment.id).secret
        versioned_agent(client, "logged")
        job = wait_for_end(client, client.deployments.deploy(environment.id, ["logged"]).id)
        assert job.status == "complete", job
    finally:
        target.close()


def test_a_logged_configuration_shows_none_of_its_credentials(db, caplog):
    """A statement that fails quotes its parameters, a configuration's JSON among them; a logger may
    be handed the object itself. Values under credential-named keys leave every line redacted."""
    logredact.install()
    caplog.set_level(logging.DEBUG)
    planted = {name: f"{name}-{uuid.uuid4().hex}" for name in ("apikey", "bearer", "password", "token")}
    config = {
        "model": "gpt-4o-mini",
        "apiKey": planted["apikey"],
        "headers": {"Authorization": f"Bearer {planted['bearer']}"},
        "auth": {"user": "svc", "pass": planted["password"]},
    }
    logger = logging.getLogger("orgdeck.test")
    try:
        with db.session(write=True) as session:
            session.execute(
                text("INSERT INTO no_such_table (config) VALUES (:config)"), {"config": json.dumps(config)}
            )
    except DBAPIError:
        logger.exception("Unhandled error on POST /api/agents")
    logger.warning("Resolved config: %s", config)
    logger.info("Calling with token=%s", planted["token"])

    lines = caplog.text
    assert "no_such_table" in lines and "gpt-4o-mini" in lines, "nothing was logged: nothing was checked"
    leaked = [name for name, secret in planted.items() if secret in lines]
    assert not leaked, f"the {leaked} credentials are in the logs"

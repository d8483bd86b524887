"""The Notifications page's deliveries: a delivery's detail (opened from either table or by its id)
with what was sent and what came back, Resend; a channel disabled, enabled and recovered, renamed,
and its signing secret rotated (shown once)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from sqlalchemy import select
from standardwebhooks import Webhook

from api import OrgdeckClient
from service.events.service import record_event
from service.orgs.models import OrganizationRow
from tests.conftest import wait_for
from tests.console.conftest import texts

PAGE = "pages/notifications.py"
ANSWER = b'{"accepted":true,"trace":"t-42"}'


class Receiver:
    """A webhook receiver on loopback: answers 200 with a JSON note; keeps each request."""

    def __init__(self) -> None:
        self.requests: list[tuple[dict[str, str], bytes]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.requests.append(({k.lower(): v for k, v in self.headers.items()}, body))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("X-Trace", "t-42")
                self.send_header("Content-Length", str(len(ANSWER)))
                self.end_headers()
                self.wfile.write(ANSWER)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver()
    threading.Thread(target=found.server.serve_forever, daemon=True).start()
    yield found
    found.server.shutdown()
    found.server.server_close()


@pytest.fixture
def orgdeck(server, org) -> Iterator[OrgdeckClient]:
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as client:
        yield client


def sent_delivery(orgdeck: OrgdeckClient, receiver: Receiver, name: str = "Receiver"):
    channel = orgdeck.notifications.create_channel(name, "webhook", url=receiver.url)
    delivery = orgdeck.notifications.test_channel(channel.id, event_type="agent.error")
    wait_for(lambda: orgdeck.notifications.delivery(delivery.id).status == "sent", what="the delivery sent")
    return channel, delivery


def pick_row(app, table_key: str, row: int) -> None:
    """Pick a row of a selectable table, as a click on it does."""
    app.session_state[table_key] = {"selection": {"rows": [row], "columns": [], "cells": []}}
    app.run()


def test_a_picked_delivery_shows_what_was_sent_and_what_came_back(console, orgdeck, receiver):
    channel, delivery = sent_delivery(orgdeck, receiver)
    app = console(PAGE)
    deliveries = next(frame.value for frame in app.dataframe if "Attempts" in frame.value.columns)
    assert list(deliveries["Message id"]) == [delivery.id]
    assert list(deliveries["Status"]) == ["sent"]
    pick_row(app, "deliveries_table", 0)

    assert not app.exception
    assert "agent.error → Receiver" in [s.value for s in app.subheader]
    shown = texts(app)
    assert f"message `{delivery.id}`" in shown and "1 attempt" in shown
    assert f"**Sent** POST to `{receiver.url}`" in shown
    (_headers, body) = receiver.requests[0]
    assert json.loads(body)["type"] == "agent.error"
    codes = [c.value for c in app.code]
    assert json.dumps(json.loads(body), indent=2) in codes  # exactly the body that was sent, readable
    assert ANSWER.decode() in codes  # and the receiver's answer
    (attempt,) = [e for e in app.expander if e.label.startswith("#1")]
    assert attempt.label.startswith("#1 · sent · HTTP 200 in ")
    shown_json = [json.loads(j.value) if isinstance(j.value, str) else j.value for j in app.json]
    assert {"webhook-id": delivery.id}.items() <= next(j for j in shown_json if "webhook-id" in j).items()
    assert next(j for j in shown_json if "x-trace" in j)["x-trace"] == "t-42"
    assert channel.signing_secret and channel.signing_secret.removeprefix("whsec_") not in shown

    app.button(key="resend_delivery").click().run()
    assert not app.exception
    assert f"Queued message `{delivery.id}` to **Receiver** again" in texts(app)
    wait_for(lambda: len(receiver.requests) == 2, what="the resent message")
    assert receiver.requests[1][0]["webhook-id"] == delivery.id
    wait_for(
        lambda: orgdeck.notifications.delivery(delivery.id).attempts == 2, what="the second attempt logged"
    )
    app.run()
    assert "2 attempts" in texts(app)
    assert [e.label[:13] for e in app.expander if e.label.startswith("#")] == [
        "#2 · sent · H",
        "#1 · sent · H",
    ]
    app.button(key="close_delivery").click().run()
    assert "agent.error → Receiver" not in [s.value for s in app.subheader]  # closed, and stays so
    app.run()
    assert "agent.error → Receiver" not in [s.value for s in app.subheader]


def test_a_delivery_opens_from_the_attempt_log_and_by_its_id(console, orgdeck, receiver):
    _channel, delivery = sent_delivery(orgdeck, receiver)
    app = console(PAGE)
    pick_row(app, "log_table", 0)
    assert "agent.error → Receiver" in [s.value for s in app.subheader]
    app.button(key="close_delivery").click().run()

    next(t for t in app.text_input if t.label == "Find a message by its id").input(delivery.id)
    next(b for b in app.button if b.label == "Open").click().run()
    assert "agent.error → Receiver" in [s.value for s in app.subheader]
    next(t for t in app.text_input if t.label == "Find a message by its id").input("msg_nothing")
    next(b for b in app.button if b.label == "Open").click().run()
    assert not app.exception
    assert "No delivery `msg_nothing` in this organization" in texts(app)


def test_disable_holds_events_and_recover_sends_them(console, orgdeck, receiver, db, org):
    channel = orgdeck.notifications.create_channel("Paused", "webhook", url=receiver.url)
    orgdeck.notifications.subscribe(channel.id, "deployment.complete")
    app = console(PAGE)
    app.button(key=f"disable_{channel.id}").click().run()
    assert "Disabled **Paused**: its events are held" in texts(app)
    assert orgdeck.notifications.list_channels().items[0].state == "disabled"

    with db.session(write=True) as session:
        org_id = session.scalar(select(OrganizationRow.id).where(OrganizationRow.slug == org.slug))
        for n in range(3):
            record_event(session, org_id=org_id, type="deployment.complete", payload={"jobId": f"job_{n}"})
    wait_for(lambda: orgdeck.notifications.deliveries(status=["held"]).total == 3, what="three held")
    app.run()
    assert "3 failed, dead or held deliveries" in texts(app)
    assert receiver.requests == []

    app.button(key=f"enable_{channel.id}").click().run()
    assert "Enabled **Paused**. What was held" in texts(app)
    since = datetime.now(UTC) - timedelta(hours=1)
    app.date_input(key=f"recover_{channel.id}_day").set_value(since.date())
    app.time_input(key=f"recover_{channel.id}_time").set_value(since.time().replace(second=0, microsecond=0))
    next(b for b in app.button if b.label == "Recover").click().run()
    assert not app.exception
    assert "Queued 3 deliveries to **Paused**" in texts(app)
    wait_for(lambda: len(receiver.requests) == 3, what="the three held deliveries sent")
    assert wait_for(lambda: orgdeck.notifications.deliveries(status=["sent"]).total == 3)


def test_rename_and_rotate_the_signing_secret_shown_once(console, orgdeck, receiver):
    channel = orgdeck.notifications.create_channel("Old name", "webhook", url=receiver.url)
    app = console(PAGE)
    app.text_input(key=f"rename_{channel.id}_name").input("New name")
    next(b for b in app.button if b.label == "Rename").click().run()
    assert "Renamed **Old name** to **New name**." in texts(app)
    assert orgdeck.notifications.list_channels().items[0].name == "New name"

    app.button(key=f"rotate_{channel.id}_start").click().run()
    assert "It is shown once" in texts(app)
    app.button(key=f"rotate_{channel.id}_confirm").click().run()
    assert not app.exception
    assert "Rotated the signing secret of **New name**." in texts(app)
    (secret,) = [c.value for c in app.code if c.value.startswith("whsec_")]
    assert secret != channel.signing_secret
    assert "keeps signing too until" in texts(app)
    app.run()
    assert secret not in texts(app)  # shown once

    orgdeck.notifications.test_channel(channel.id)
    wait_for(lambda: receiver.requests, what="a delivery signed by both secrets")
    headers, body = receiver.requests[0]
    for signing in (secret, channel.signing_secret or ""):
        Webhook(signing).verify(body, headers)
    assert "The previous secret still signs too until" in texts(app)

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler

import pytest

from api import OrgdeckClient
from api.events import EVENT_TYPES
from tests.console.conftest import texts
from tests.processes import http_peer
from tests.test_notifications import add_logs

PAGE = "pages/notifications.py"


def org_client(server, org) -> OrgdeckClient:
    return OrgdeckClient(server.url, org.key, org_slug=org.slug)


def button(app, label: str):
    return next(b for b in app.button if b.label == label)


def table(app, column: str):
    """The first table on the page with this column: the log has "Attempt", the channels "Kind"."""
    return next(frame.value for frame in app.dataframe if column in frame.value.columns)


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[dict[str, str]]]]:
    """A webhook receiver on loopback: its URL and the headers of each POST it answered 200."""
    received: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            received.append({k.lower(): v for k, v in self.headers.items()})
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    with http_peer(Handler) as server:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook", received


def test_empty_state_says_where_to_start(console):
    app = console(PAGE)
    assert "Nothing is delivered yet" in texts(app)
    assert "No channels yet" in texts(app)
    assert "Create a channel first" in texts(app)
    assert not app.get("plotly_chart")


def test_create_a_webhook_channel_shows_its_secret_once(console, server, org):
    app = console(PAGE)
    next(t for t in app.text_input if t.label == "Name").input("Deploy hook")
    next(t for t in app.text_input if t.label == "URL").input("https://hooks.example.com/orgdeck")
    button(app, "Create channel").click().run()
    assert not app.exception
    assert "Created channel **Deploy hook**" in texts(app)
    secret = app.code[0].value
    assert secret.startswith("whsec_")
    assert "shown this once" in texts(app)
    with org_client(server, org) as orgdeck:
        (channel,) = orgdeck.notifications.list_channels().items
    assert (channel.name, channel.kind, channel.config) == (
        "Deploy hook",
        "webhook",
        {"url": "https://hooks.example.com/orgdeck"},
    )
    assert list(table(app, "Kind")["Name"]) == ["Deploy hook"]
    app.run()  # any further interaction: the secret is gone
    assert secret not in texts(app)


def test_create_an_email_channel_and_an_invalid_one(console, server, org):
    app = console(PAGE)
    app.radio(key="channel_kind").set_value("email").run()
    next(t for t in app.text_input if t.label == "Name").input("On call")
    next(t for t in app.text_input if t.label == "Recipients").input("a@example.com, b@example.com")
    button(app, "Create channel").click().run()
    assert "Created channel **On call**" in texts(app)
    assert not app.code  # an email channel has no signing secret
    app.radio(key="channel_kind").set_value("webhook").run()
    next(t for t in app.text_input if t.label == "Name").input("Typo")
    next(t for t in app.text_input if t.label == "URL").input("ftp://example.com/hook")
    button(app, "Create channel").click().run()
    assert not app.exception
    # Next to the field, and what was typed is still there to correct.
    assert [e.value for e in app.error] == [
        "URL: 'ftp://example.com/hook' must start with http:// or https://"
    ]
    assert next(t for t in app.text_input if t.label == "URL").value == "ftp://example.com/hook"
    assert next(t for t in app.text_input if t.label == "Name").value == "Typo"
    with org_client(server, org) as orgdeck:
        channels = orgdeck.notifications.list_channels().items
    assert [(c.name, c.config) for c in channels] == [
        ("On call", {"recipients": ["a@example.com", "b@example.com"]})
    ]


def test_send_test_is_delivered_and_logged(console, server, org, receiver):
    url, received = receiver
    with org_client(server, org) as orgdeck:
        channel = orgdeck.notifications.create_channel("Receiver", "webhook", url=url)
    app = console(PAGE)
    app.selectbox(key=f"test_event_{channel.id}").select("agent.error")
    app.button(key=f"test_channel_{channel.id}").click().run()
    assert not app.exception
    assert "Queued a test `agent.error` for **Receiver**" in texts(app)
    deadline = time.monotonic() + 30
    while not received and time.monotonic() < deadline:
        time.sleep(0.1)
    assert received and received[0]["webhook-signature"].startswith("v1,")
    with org_client(server, org) as orgdeck:
        while orgdeck.notifications.logs().total == 0 and time.monotonic() < deadline:
            time.sleep(0.1)
    app.run()
    log = table(app, "Attempt")
    assert list(log["Status"]) == ["sent"]
    assert list(log["Event"]) == ["agent.error"]
    assert list(log["HTTP"]) == ["204"]
    assert list(log["Message id"]) == [received[0]["webhook-id"]]


def test_a_revoked_key_is_explained_not_a_traceback(console, server, org):
    app = console(PAGE)
    with org_client(server, org) as orgdeck:
        other = orgdeck.api_keys.create("other")
    with OrgdeckClient(server.url, other.key, org_slug=org.slug) as as_other:
        (console_key,) = [key for key in as_other.api_keys.list().items if key.name == "admin"]
        as_other.api_keys.revoke(console_key.id)
    app.run()
    assert not app.exception
    assert "Could not count deliveries" in texts(app)
    assert "revoked" in texts(app)


def test_delete_asks_first_and_keeps_the_logs(console, server, org, db):
    with org_client(server, org) as orgdeck:
        doomed = orgdeck.notifications.create_channel("Old hook", "webhook", url="https://example.com/h")
        orgdeck.notifications.subscribe(doomed.id, "deployment.error")
        orgdeck.notifications.subscribe(doomed.id, "agent.error")
    add_logs(db, org, [(datetime.now(UTC), doomed.id, "sent")], names={doomed.id: "Old hook"})
    app = console(PAGE)
    app.button(key=f"delete_channel_{doomed.id}_start").click().run()
    assert "Its 2 subscriptions go too" in texts(app)
    assert "delivery logs are kept" in texts(app)
    with org_client(server, org) as orgdeck:
        assert orgdeck.notifications.list_channels().total == 1  # nothing deleted before confirming
    app.button(key=f"delete_channel_{doomed.id}_confirm").click().run()
    assert not app.exception
    assert "Deleted channel **Old hook**" in texts(app)
    assert "No channels yet" in texts(app)
    with org_client(server, org) as orgdeck:
        assert orgdeck.notifications.list_channels().items == []
        assert orgdeck.notifications.list_subscriptions().items == []
        assert orgdeck.notifications.logs().total == 1
    assert list(table(app, "Attempt")["Channel"]) == ["Old hook"]
    assert "Old hook (deleted)" in app.selectbox(key="log_channel").options


def test_subscription_toggles_subscribe_and_unsubscribe(console, server, org):
    with org_client(server, org) as orgdeck:
        hook = orgdeck.notifications.create_channel("Hook", "webhook", url="https://example.com/h")
        mail = orgdeck.notifications.create_channel("Mail", "email", recipients=["ops@example.com"])
        orgdeck.notifications.subscribe(hook.id, "deployment.error")
    app = console(PAGE)
    matrix = app.data_editor[0].value
    assert list(matrix.index) == list(EVENT_TYPES)
    assert list(matrix.columns) == [hook.id, mail.id]
    assert matrix.at["deployment.error", hook.id] and not matrix.at["agent.error", mail.id]
    assert app.button(key="apply_subscriptions").disabled
    app.session_state["subscription_matrix"] = {
        "edited_rows": {
            EVENT_TYPES.index("deployment.error"): {hook.id: False},
            EVENT_TYPES.index("agent.error"): {mail.id: True},
            EVENT_TYPES.index("agent.drifted"): {mail.id: True},
        },
        "added_rows": [],
        "deleted_rows": [],
    }
    app.run()
    assert app.button(key="apply_subscriptions").label == "Apply 3 changes"
    app.button(key="apply_subscriptions").click().run()
    assert not app.exception
    assert "Subscriptions saved" in texts(app)
    assert "unsubscribed **Hook** from `deployment.error`" in texts(app)
    with org_client(server, org) as orgdeck:
        subscriptions = orgdeck.notifications.list_subscriptions().items
    assert {(s.channel_id, s.event_type, s.enabled) for s in subscriptions} == {
        (mail.id, "agent.error", True),
        (mail.id, "agent.drifted", True),
    }
    matrix = app.data_editor[0].value
    assert matrix.at["agent.error", mail.id] and not matrix.at["deployment.error", hook.id]
    assert app.button(key="apply_subscriptions").disabled


def test_a_paused_subscription_is_shown_and_can_be_enabled(console, server, org):
    with org_client(server, org) as orgdeck:
        hook = orgdeck.notifications.create_channel("Hook", "webhook", url="https://example.com/h")
        orgdeck.notifications.subscribe(hook.id, "agent.stale", enabled=False)
    app = console(PAGE)
    assert "Hook → `agent.stale`" in texts(app)
    app.session_state["subscription_matrix"] = {
        "edited_rows": {EVENT_TYPES.index("agent.stale"): {hook.id: True}},
        "added_rows": [],
        "deleted_rows": [],
    }
    app.run()
    app.button(key="apply_subscriptions").click().run()
    with org_client(server, org) as orgdeck:
        (subscription,) = orgdeck.notifications.list_subscriptions().items
    assert (subscription.event_type, subscription.enabled) == ("agent.stale", True)


def seeded_log(db, org, server) -> tuple[str, str]:
    """120 attempts over the last 60 hours, newest first every 30 minutes, to two channels."""
    with org_client(server, org) as orgdeck:
        hook = orgdeck.notifications.create_channel("Hook", "webhook", url="https://example.com/h").id
        slack = orgdeck.notifications.create_channel("Slack", "slack", url="https://example.com/s").id
    now = datetime.now(UTC)
    statuses = ("sent", "sent", "failed", "sent", "dead")
    rows = [
        (now - timedelta(minutes=30 * i), (hook, slack)[i % 2], statuses[i % 5], EVENT_TYPES[i % 3])
        for i in range(120)
    ]
    add_logs(db, org, rows, names={hook: "Hook", slack: "Slack"})
    return hook, slack


def test_log_filters_and_paging(console, server, org, db):
    hook, _slack = seeded_log(db, org, server)
    app = console(PAGE)
    log = table(app, "Attempt")
    assert len(log) == 50
    assert "1 to 50 of 120 attempts" in texts(app)
    times = list(log["Time"])
    assert times == sorted(times, reverse=True)

    app.button(key="log_pager_forward").click().run()
    app.button(key="log_pager_forward").click().run()
    assert len(table(app, "Attempt")) == 20
    assert "101 to 120 of 120 attempts" in texts(app)
    assert app.button(key="log_pager_forward").disabled
    app.button(key="log_pager_back").click().run()
    assert "51 to 100 of 120 attempts" in texts(app)

    app.multiselect(key="log_status").select("dead").run()
    log = table(app, "Attempt")
    assert set(log["Status"]) == {"dead"} and len(log) == 24
    assert "1 to 24 of 24 attempts" in texts(app)  # a new filter starts at the first page

    app.selectbox(key="log_channel").select(hook).run()
    app.multiselect(key="log_status").unselect("dead").select("failed").run()
    log = table(app, "Attempt")
    assert set(log["Channel"]) == {"Hook"} and set(log["Status"]) == {"failed"}
    assert len(log) == 12

    app.multiselect(key="log_status").unselect("failed").run()
    app.selectbox(key="log_event").select("agent.error").run()
    log = table(app, "Attempt")
    assert set(log["Event"]) == {"agent.error"} and set(log["Channel"]) == {"Hook"}
    assert len(log) == 20

    today = datetime.now(UTC).date()
    app.selectbox(key="log_event").select("Any").run()
    app.date_input[0].set_value((today, today)).run()
    log = table(app, "Attempt")
    assert all(moment.date() == today for moment in log["Time"])


def test_log_filters_that_match_nothing_say_so(console, server, org, db):
    seeded_log(db, org, server)
    app = console(PAGE)
    app.selectbox(key="log_event").select("deployment.partial").run()
    assert "No attempt matches these filters" in texts(app)


def test_summary_and_charts_come_from_the_counts(console, server, org, db):
    seeded_log(db, org, server)
    app = console(PAGE)
    metrics = {m.label: m.value for m in app.metric}
    assert metrics["Delivered"] == "72"
    assert metrics["Failed, retried"] == "24"
    assert metrics["Dead"] == "24"
    assert metrics["Failure rate"] == "40%"
    assert "24 deliveries dead" in texts(app)
    charts = app.get("plotly_chart")
    assert len(charts) == 2
    per_day, per_channel = (chart.proto.spec for chart in charts)
    assert "Delivery attempts per day" in per_day and '"barmode":"stack"' in per_day
    assert "Failure rate per channel" in per_channel and "Hook" in per_channel
    app.radio(key="notifications_period").set_value(7).run()
    assert not app.exception
    assert {m.label: m.value for m in app.metric}["Delivered"] == "72"


def test_leaving_the_page_and_coming_back_keeps_working(console, server, org, db):
    """Streamlit drops a widget's state when its page is left: the log's position must not live there."""
    seeded_log(db, org, server)
    app = console(PAGE)
    app.button(key="log_pager_forward").click().run()
    assert "51 to 100 of 120 attempts" in texts(app)
    for _ in range(2):
        app.switch_page("pages/overview.py").run()
        assert not app.exception, app.exception
        app.switch_page(PAGE).run()
        assert not app.exception, app.exception
        assert "of 120 attempts" in texts(app)

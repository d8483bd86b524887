"""Notifications: how deliveries are going, every delivery with what was sent and what came back
(resend), the log of attempts, channels (enable, disable, rename, recover an outage, rotate a
secret) and their subscriptions."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, time, timedelta

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from api import ApiError
from api.errors import NotFound
from api.events import EVENT_TYPES
from api.notifications import (
    DELIVERY_STATUSES,
    LOG_STATUSES,
    Channel,
    Delivery,
    DeliveryAttempt,
    DeliveryDetail,
    LogEntry,
    LogStats,
    Subscription,
)
from components import layout
from components.charts import AMBER, GREEN, RED
from components.confirm import confirmed
from components.connection import client, current
from components.dates import recent_days
from components.feedback import load, notify, plain, show_error, show_notice
from components.formatting import ago
from components.forms import FormFields
from components.paging import Pager, next_offset, offset_caption
from components.permissions import control, may

PERIODS = (7, 30, 90)
PAGE_SIZE = 50
ANY = "Any"
STATUS_COLOURS = {"sent": GREEN, "failed": AMBER, "dead": RED}
# A delivery's states: waiting ones in grey, held (its channel is disabled) in blue.
DELIVERY_COLOURS = STATUS_COLOURS | {"pending": "#6b7280", "held": "#2563eb"}
KINDS = {"webhook": "Webhook", "slack": "Slack", "email": "Email"}
CREATED = "created_channel"
MATRIX = "subscription_matrix"
LOG_PAGER = "log_pager"
DELIVERIES_PAGER = "deliveries_pager"
# The log's filters are kept in the URL (`bind="query-params"`): the Overview links to dead deliveries.
BOUND = "query-params"
# The delivery whose detail is open, whichever table or lookup opened it.
OPEN_DELIVERY = "open_delivery"
ROTATED = "rotated_secret"
RECOVERABLE = ["failed", "dead", "held"]
CHART_MARGIN = {"l": 10, "r": 10, "t": 56, "b": 10}
TILE_WIDTH = 200

orgdeck = client()


def destination(channel: Channel) -> str:
    """Where a channel delivers, as the service shows it (a Slack URL by its host only)."""
    if channel.kind == "email":
        return ", ".join(channel.config.get("recipients", []))
    return str(channel.config.get("url", ""))


def rate(failed: int, attempts: int) -> str:
    return f"{failed / attempts:.0%}" if attempts else "—"


# --- how deliveries are going ---------------------------------------------------------------------


def summary(stats: LogStats) -> None:
    sent = sum(day.sent for day in stats.per_day)
    failed = sum(day.failed for day in stats.per_day)
    dead = sum(day.dead for day in stats.per_day)
    tiles = st.container(horizontal=True, gap="small")
    tiles.metric(
        "Delivered", sent, help="Attempts that got a 2xx answer (or were accepted by SMTP).", width=TILE_WIDTH
    )
    tiles.metric(
        "Failed, retried", failed, help="Attempts that failed with a retry scheduled.", width=TILE_WIDTH
    )
    tiles.metric(
        "Dead", dead, help="Deliveries whose last retry failed: the event never arrived.", width=TILE_WIDTH
    )
    tiles.metric(
        "Failure rate", rate(failed + dead, sent + failed + dead), help="Of all attempts.", width=TILE_WIDTH
    )
    if dead:
        st.error(
            f"**{dead} deliver{'y' if dead == 1 else 'ies'} dead** in the last {stats.days} days: "
            "the event never reached its channel. Filter the log below by status *dead* to see why.",
            icon=":material/error:",
        )


def per_day_figure(stats: LogStats) -> go.Figure:
    days = [day.day for day in stats.per_day]
    figure = go.Figure(
        [
            go.Bar(
                x=days,
                y=[getattr(day, status) for day in stats.per_day],
                name=status,
                marker_color=STATUS_COLOURS[status],
                hovertemplate=f"%{{x|%a %d %b}}: %{{y}} {status}<extra></extra>",
            )
            for status in LOG_STATUSES
        ]
    )
    figure.update_layout(
        title={"text": "Delivery attempts per day", "font": {"size": 14}},
        barmode="stack",
        height=300,
        margin=CHART_MARGIN,
        # Under the title, not over it: a narrow chart has no room for both on one line.
        legend={"orientation": "h", "y": 1.0, "yanchor": "bottom", "x": 0, "xanchor": "left"},
        xaxis={"type": "date", "showgrid": False},
        yaxis={"title": None, "rangemode": "tozero"},
        plot_bgcolor="rgba(0,0,0,0)",
    )
    return figure


def failure_rate_figure(stats: LogStats) -> go.Figure:
    channels = stats.per_channel
    attempts = [c.sent + c.failed + c.dead for c in channels]
    figure = go.Figure(
        go.Bar(
            x=[c.failure_rate for c in channels],
            y=[c.channel_name for c in channels],
            orientation="h",
            marker_color=[RED if c.dead else AMBER if c.failed else GREEN for c in channels],
            text=[f"{c.failure_rate:.0%} of {n}" for c, n in zip(channels, attempts, strict=True)],
            textposition="auto",
            customdata=[[c.failed, c.dead] for c in channels],
            hovertemplate="<b>%{y}</b>: %{x:.1%} failed<br>"
            "%{customdata[0]} retried, %{customdata[1]} dead<extra></extra>",
        )
    )
    figure.update_layout(
        title={"text": "Failure rate per channel", "font": {"size": 14}},
        height=300,
        margin=CHART_MARGIN,
        xaxis={
            "tickformat": ".0%",
            "rangemode": "tozero",
            "range": [0, max(0.1, *(c.failure_rate for c in channels)) * 1.15],
        },
        yaxis={"autorange": "reversed", "type": "category"},
        plot_bgcolor="rgba(0,0,0,0)",
    )
    return figure


def charts(stats: LogStats) -> None:
    if not stats.per_channel:
        st.info(f"No delivery attempts in the last {stats.days} days.", icon=":material/info:")
        return
    days_col, channels_col = layout.panes("delivery_charts", 2)
    days_col.plotly_chart(per_day_figure(stats), width="stretch", config={"displayModeBar": False})
    channels_col.plotly_chart(failure_rate_figure(stats), width="stretch", config={"displayModeBar": False})


# --- the delivery log -------------------------------------------------------------------------------


def date_range(days: int) -> tuple[datetime | None, datetime | None]:
    """The picked UTC dates as [start, end) instants; the end date is included whole."""
    picked = recent_days("Dates (UTC)", days, key="log_dates", bind=True)
    if picked is None:
        return None, None
    first, last = picked
    return datetime.combine(first, time.min, tzinfo=UTC), datetime.combine(
        last + timedelta(days=1), time.min, tzinfo=UTC
    )


def log_table(entries: list[LogEntry]) -> str | None:
    """The attempts; the delivery of the one whose row was picked, if any."""
    # Optional values as text, so that an absent one is an empty cell rather than "None".
    table = pd.DataFrame(
        [
            {
                "Time": entry.created_at,
                "Status": entry.status,
                "Event": entry.event_type,
                "Channel": entry.channel_name,
                "Attempt": entry.attempt,
                "HTTP": str(entry.response_status or ""),
                "Error": entry.error or "",
                "Latency (ms)": str(entry.latency_ms if entry.latency_ms is not None else ""),
                "Next attempt": f"{entry.next_attempt_at:%Y-%m-%d %H:%M:%S}" if entry.next_attempt_at else "",
                "Message id": entry.delivery_id,
            }
            for entry in entries
        ]
    )
    picked = st.dataframe(
        table.style.map(lambda s: f"color: {STATUS_COLOURS[s]}; font-weight: 600", subset=["Status"]),
        hide_index=True,
        width="stretch",
        on_select="rerun",
        selection_mode="single-row",
        key="log_table",
        column_config={
            "Time": st.column_config.DatetimeColumn(format="YYYY-MM-DD HH:mm:ss"),
            "HTTP": st.column_config.TextColumn(help="The receiver's answer"),
            "Error": st.column_config.TextColumn(width="large"),
            "Next attempt": st.column_config.TextColumn(help="When a failed attempt is retried (UTC)"),
            "Message id": st.column_config.TextColumn(
                help="The `webhook-id` header: the same on every attempt of one delivery"
            ),
        },
    )
    rows = picked.selection.rows
    return entries[rows[0]].delivery_id if rows else None


def delivery_log(channels: list[Channel], stats: LogStats) -> None:
    # Channels deleted since keep their attempts in the log: they can be filtered on too.
    names = {c.id: c.name for c in channels}
    names |= {
        c.channel_id: f"{c.channel_name} (deleted)" for c in stats.per_channel if c.channel_id not in names
    }
    event_col, channel_col, status_col, dates_col = layout.fields("log_filters", 4)
    event_type = event_col.selectbox("Event type", [ANY, *EVENT_TYPES], key="log_event", bind=BOUND)
    channel_id = channel_col.selectbox(
        "Channel", [ANY, *names], format_func=lambda c: names.get(c, c), key="log_channel", bind=BOUND
    )
    statuses = status_col.multiselect(
        "Status", list(LOG_STATUSES), placeholder="Any", key="log_status", bind=BOUND
    )
    with dates_col:
        start, end = date_range(stats.days)
    # Kept out of widget state, which Streamlit drops when the page is left: coming back to the page
    # once read a position that was no longer there.
    pager = Pager(LOG_PAGER, (event_type, channel_id, tuple(statuses), start, end))
    page = load(
        "load the delivery log",
        lambda: orgdeck.notifications.logs(
            event_type=None if event_type == ANY else event_type,
            channel_id=None if channel_id == ANY else channel_id,
            status=statuses or None,
            start=start,
            end=end,
            limit=PAGE_SIZE,
            offset=pager.offset,
        ),
    )
    total = page.total or 0
    if not page.items:
        filtered = event_type != ANY or channel_id != ANY or statuses
        st.info(
            "No attempt matches these filters." if filtered else "No delivery attempts in these dates.",
            icon=":material/info:",
        )
        return
    open_picked("log", log_table(page.items))
    pager.controls(
        next_offset(pager.offset, len(page.items), total),
        offset_caption(pager.offset, len(page.items), total, "attempts, newest first"),
    )


# --- deliveries and what each one sent and got back ---------------------------------------------------


def deliveries_table(deliveries: list[Delivery]) -> str | None:
    """The page's deliveries; the id of the one whose row was picked, if any."""
    table = pd.DataFrame(
        [
            {
                "Created": d.created_at,
                "Status": d.status,
                "Event": d.event_type,
                "Channel": d.channel_name,
                "Attempts": d.attempts,
                "Last answer": str(d.last_response_status or ""),
                "Last error": d.last_error or "",
                "Next attempt": f"{d.next_attempt_at:%Y-%m-%d %H:%M:%S}" if d.next_attempt_at else "",
                "Message id": d.id,
            }
            for d in deliveries
        ]
    )
    picked = st.dataframe(
        table.style.map(lambda s: f"color: {DELIVERY_COLOURS[s]}; font-weight: 600", subset=["Status"]),
        hide_index=True,
        width="stretch",
        on_select="rerun",
        selection_mode="single-row",
        key="deliveries_table",
        column_config={
            "Created": st.column_config.DatetimeColumn(format="YYYY-MM-DD HH:mm:ss"),
            "Last answer": st.column_config.TextColumn(help="The HTTP status of the last attempt"),
            "Last error": st.column_config.TextColumn(width="large"),
            "Next attempt": st.column_config.TextColumn(help="When it is tried again (UTC)"),
        },
    )
    rows = picked.selection.rows
    return deliveries[rows[0]].id if rows else None


def deliveries_section(channels: list[Channel]) -> None:
    """Every delivery (one per event and channel) and its state; picking one opens its detail."""
    names = {c.id: c.name for c in channels}
    status_col, channel_col, event_col = st.columns(3)
    statuses = status_col.multiselect(
        "State",
        list(DELIVERY_STATUSES),
        placeholder="Any",
        key="deliveries_status",
        help="pending: not tried yet · failed: retrying · sent · dead: every retry failed · "
        "held: its channel was disabled",
    )
    channel_id = channel_col.selectbox(
        "Channel", [ANY, *names], format_func=lambda c: names.get(c, c), key="deliveries_channel"
    )
    event_type = event_col.selectbox("Event type", [ANY, *EVENT_TYPES], key="deliveries_event_type")
    pager = Pager(DELIVERIES_PAGER, (tuple(statuses), channel_id, event_type))
    page = load(
        "load the deliveries",
        lambda: orgdeck.notifications.deliveries(
            status=statuses or None,
            channel_id=None if channel_id == ANY else channel_id,
            event_type=None if event_type == ANY else event_type,
            limit=PAGE_SIZE,
            offset=pager.offset,
        ),
    )
    if page.items:
        open_picked("deliveries", deliveries_table(page.items))
        total = page.total or 0
        pager.controls(
            next_offset(pager.offset, len(page.items), total),
            offset_caption(pager.offset, len(page.items), total, "deliveries, newest first")
            + " · pick a row to see what was sent and what came back",
        )
    else:
        filtered = statuses or channel_id != ANY or event_type != ANY
        st.info(
            "No delivery matches these filters." if filtered else "No deliveries yet.", icon=":material/info:"
        )
    with st.form("find_delivery", border=False):
        find_col, button_col = st.columns([4, 1], vertical_alignment="bottom")
        wanted = find_col.text_input(
            "Find a message by its id",
            placeholder="msg_…",
            help="The `webhook-id` header a receiver got: the same on every attempt of one delivery.",
        )
        if button_col.form_submit_button("Open", width="stretch") and wanted.strip():
            st.session_state[OPEN_DELIVERY] = wanted.strip()
            st.rerun()


def open_picked(table: str, delivery_id: str | None) -> None:
    """Open the delivery of a row just picked in `table` (a row left picked does not reopen it)."""
    seen = f"{table}_picked"
    if delivery_id != st.session_state.get(seen):
        st.session_state[seen] = delivery_id
        if delivery_id:
            st.session_state[OPEN_DELIVERY] = delivery_id
            st.rerun()


def delivery_detail(delivery_id: str) -> None:
    """One delivery: its event, what every attempt sends, and each attempt with the answer to it."""
    try:
        detail = orgdeck.notifications.delivery(delivery_id)
    except NotFound:
        st.session_state.pop(OPEN_DELIVERY, None)
        st.warning(
            f"No delivery `{delivery_id}` in this organization (a deleted channel's deliveries go with "
            "it; their attempts stay in the log).",
            icon=":material/search_off:",
        )
        return
    except ApiError as error:
        show_error(error, "load the delivery")
        return
    with st.container(border=True):
        title_col, resend_col, close_col = st.columns([6, 1, 1], vertical_alignment="center")
        title_col.subheader(f"{detail.event_type} → {detail.channel_name}", anchor=False)
        if resend_col.button(
            "Resend", icon=":material/replay:", key="resend_delivery", width="stretch", **control("resend")
        ):
            resend(detail)
        if close_col.button("Close", key="close_delivery", width="stretch"):
            st.session_state.pop(OPEN_DELIVERY, None)
            st.rerun()
        st.markdown(delivery_summary(detail))
        demo = detail.event.payload.get("demo")
        if demo:
            st.caption(f":material/info: {demo}: nothing of it was really sent.")
        event_col, request_col = st.columns(2, gap="large")
        with event_col:
            st.markdown(f"**Event** `{detail.event.id}` at {detail.event.occurred_at:%Y-%m-%d %H:%M:%S} UTC")
            st.json(detail.event.payload, expanded=2)
        with request_col:
            st.markdown(f"**Sent** {detail.request.method} to `{detail.request.destination}`")
            st.code(
                readable(detail.request.body, detail.request.content_type), language=None, wrap_lines=True
            )
        attempts_detail(detail.attempt_log)


def delivery_summary(detail: DeliveryDetail) -> str:
    colour = {"sent": "green", "failed": "orange", "dead": "red", "held": "blue"}.get(detail.status, "gray")
    parts = [
        f":{colour}-badge[{detail.status}]",
        f"message `{detail.id}`",
        f"{detail.attempts} attempt{'s' if detail.attempts != 1 else ''}",
        f"created {ago(detail.created_at)}",
    ]
    if detail.next_attempt_at:
        parts.append(f"next attempt {detail.next_attempt_at:%Y-%m-%d %H:%M:%S} UTC")
    return " · ".join(parts)


def readable(body: str, content_type: str) -> str:
    """A JSON body indented, anything else as it is."""
    if content_type != "application/json":
        return body
    try:
        return json.dumps(json.loads(body), indent=2)
    except ValueError:
        return body


def attempts_detail(attempts: list[DeliveryAttempt]) -> None:
    if not attempts:
        st.info("No attempt yet.", icon=":material/schedule:")
        return
    st.markdown("**Attempts**")
    for attempt in reversed(attempts):  # newest first, the one people look for
        answer = f"HTTP {attempt.response_status}" if attempt.response_status else "no answer"
        latency = f" in {attempt.latency_ms} ms" if attempt.latency_ms is not None else ""
        title = (
            f"#{attempt.attempt} · {attempt.status} · {answer}{latency} · "
            f"{attempt.created_at:%Y-%m-%d %H:%M:%S} UTC"
        )
        with st.expander(title, expanded=attempt is attempts[-1]):
            if attempt.error:
                st.error(attempt.error, icon=":material/error:")
            if attempt.next_attempt_at:
                st.caption(f"Retried at {attempt.next_attempt_at:%Y-%m-%d %H:%M:%S} UTC")
            sent_col, got_col = st.columns(2, gap="large")
            with sent_col:
                st.markdown("Request headers")
                st.json(attempt.request_headers or {}, expanded=True)
            with got_col:
                st.markdown("Response headers")
                st.json(attempt.response_headers or {}, expanded=True)
                st.markdown("Response body (first 4 KiB)")
                st.code(attempt.response_body or "(empty)", language=None, wrap_lines=True)


def resend(delivery: DeliveryDetail) -> None:
    try:
        orgdeck.notifications.resend(delivery.id)
    except ApiError as error:
        show_error(error, "resend the delivery")
    else:
        notify(
            f"Queued message `{delivery.id}` to **{delivery.channel_name}** again; its attempt appears "
            "here within seconds, with the same `webhook-id`."
        )


# --- channels ---------------------------------------------------------------------------------------


def channels_table(channels: list[Channel], subscriptions: list[Subscription]) -> None:
    subscribed: dict[str, list[str]] = {}
    for subscription in subscriptions:
        if subscription.enabled:
            subscribed.setdefault(subscription.channel_id, []).append(subscription.event_type)
    table = pd.DataFrame(
        [
            {
                "Name": c.name,
                "Kind": c.kind,
                "Destination": destination(c),
                "State": c.state,
                "Disabled because": c.disabled_reason or "",
                "Event types": subscribed.get(c.id, []),
                "Created": ago(c.created_at),
                "Id": c.id,
            }
            for c in channels
        ]
    )
    st.dataframe(
        table,
        hide_index=True,
        width="stretch",
        column_config={
            "Event types": st.column_config.ListColumn(help="The event types it receives"),
        },
    )


def recipients(text: str) -> list[str]:
    return [address for address in re.split(r"[\s,;]+", text) if address]


def create_form(*, expanded: bool) -> None:
    with st.expander("New channel", expanded=expanded, icon=":material/add:"):
        kind = st.radio(
            "Kind", list(KINDS), format_func=KINDS.__getitem__, horizontal=True, key="channel_kind"
        )
        with st.form("create_channel"):
            fields = FormFields("channel")
            name = fields.text_input("name", key="new_channel_name")
            if kind == "email":
                target = fields.text_input(
                    "config.recipients",
                    key="new_channel_recipients",
                    placeholder="oncall@example.com, platform@example.com",
                    help="Up to 50 addresses, separated by commas. Sent through the service's SMTP server.",
                )
            else:
                target = fields.text_input(
                    "config.url",
                    key=f"new_channel_url_{kind}",
                    label="Incoming-webhook URL" if kind == "slack" else "URL",
                    placeholder="https://hooks.slack.com/services/…" if kind == "slack" else "https://…",
                    help="The Slack URL is a credential: it is kept encrypted and shown by its host only."
                    if kind == "slack"
                    else "Deliveries are POSTed here, signed per the Standard Webhooks spec.",
                )
            if st.form_submit_button("Create channel", type="primary", **control("createChannel")):
                try:
                    created = orgdeck.notifications.create_channel(
                        name.strip(),
                        kind,
                        url=None if kind == "email" else target.strip(),
                        recipients=recipients(target) if kind == "email" else None,
                    )
                except ApiError as error:
                    fields.show(error, "create the channel")
                else:
                    fields.clear()
                    st.session_state[CREATED] = {"name": created.name, "secret": created.signing_secret}
                    notify(
                        f"Created channel **{plain(created.name)}**. Subscribe it to event types in "
                        "*Subscriptions*."
                    )


def created_secret() -> None:
    """A new webhook channel's signing secret, on the run right after its creation only."""
    created = st.session_state.pop(CREATED, None)
    if created is None or not created["secret"]:
        return
    st.warning(
        f"The signing secret of **{created['name']}** is shown this once: copy it now "
        "(the copy button is at the right of the box) into the receiver.",
        icon=":material/key:",
    )
    st.code(created["secret"], language=None)
    st.caption(
        "The receiver checks each `webhook-signature` header with it: `v1,` + base64 HMAC-SHA256 of "
        "`webhook-id.webhook-timestamp.body`, keyed with the secret's base64 part after `whsec_`."
    )


def manage_channel(channel: Channel, subscriptions: list[Subscription]) -> None:
    event_col, test_col = layout.fields(f"test_{channel.id}", 2)
    event_type = event_col.selectbox(
        "Test event type",
        EVENT_TYPES,
        index=EVENT_TYPES.index("deployment.complete"),
        key=f"test_event_{channel.id}",
    )
    if test_col.button(
        "Send test",
        icon=":material/send:",
        width="stretch",
        key=f"test_channel_{channel.id}",
        **control("testChannel"),
    ):
        try:
            orgdeck.notifications.test_channel(channel.id, event_type=event_type)
        except ApiError as error:
            show_error(error, "send the test")
        else:
            notify(
                f"Queued a test `{event_type}` for **{channel.name}**. Its attempt appears in the delivery "
                "log within seconds."
            )
    count = sum(1 for s in subscriptions if s.channel_id == channel.id)
    going = {0: "It has no subscriptions", 1: "Its subscription goes too"}.get(
        count, f"Its {count} subscriptions go too"
    )
    warning = (
        f"Delete **{channel.name}**? {going}, and deliveries not yet made are dropped. "
        "Its delivery logs are kept."
    )
    if confirmed(
        "Delete channel", key=f"delete_channel_{channel.id}", warning=warning, **control("deleteChannel")
    ):
        try:
            orgdeck.notifications.delete_channel(channel.id)
        except ApiError as error:
            show_error(error, "delete the channel")
        else:
            st.session_state.pop("channel_choice", None)
            notify(f"Deleted channel **{channel.name}** and its subscriptions; its delivery logs are kept.")


def channel_controls(channel: Channel) -> None:
    """Enable or disable, rename, recover since a time, rotate the signing secret."""
    state_col, rename_col = st.columns([1, 2], vertical_alignment="bottom")
    with state_col:
        enable_or_disable(channel)
    with rename_col, st.form(f"rename_{channel.id}", border=False):
        name_col, button_col = st.columns([3, 1], vertical_alignment="bottom")
        name = name_col.text_input("Name", value=channel.name, max_chars=200, key=f"rename_{channel.id}_name")
        if (
            button_col.form_submit_button("Rename", width="stretch", **control("updateChannel"))
            and name.strip() != channel.name
        ):
            update(
                channel,
                f"rename **{channel.name}**",
                f"Renamed **{channel.name}** to **{name.strip()}**.",
                name=name.strip(),
            )
    recover_form(channel)
    if channel.kind == "webhook":
        rotate(channel)


def update(
    channel: Channel, action: str, done: str, *, name: str | None = None, enabled: bool | None = None
) -> None:
    """Change the channel (what is not given stays) and say so, or say why not."""
    try:
        orgdeck.notifications.update_channel(channel.id, name=name, enabled=enabled)
    except ApiError as error:
        show_error(error, action)
    else:
        notify(done)


def enable_or_disable(channel: Channel) -> None:
    """Disable an active channel (its events are then held) or enable a disabled one."""
    if channel.state == "active":
        if st.button(
            "Disable",
            icon=":material/pause_circle:",
            key=f"disable_{channel.id}",
            width="stretch",
            **control(
                "updateChannel",
                help="Stop sending to it: its events are kept as held deliveries until you enable it "
                "and recover them.",
            ),
        ):
            update(
                channel,
                f"disable **{channel.name}**",
                f"Disabled **{channel.name}**: its events are held, not sent, until you enable it and recover them.",
                enabled=False,
            )
        return
    if st.button(
        "Enable",
        icon=":material/play_circle:",
        key=f"enable_{channel.id}",
        width="stretch",
        type="primary",
        **control("updateChannel"),
    ):
        update(
            channel,
            f"enable **{channel.name}**",
            f"Enabled **{channel.name}**. What was held while it was disabled waits: recover it below.",
            enabled=True,
        )


def recover_form(channel: Channel) -> None:
    """Send a channel's failed, dead and held deliveries again, from a time on (an outage's start)."""
    waiting = load(
        "count the deliveries to recover",
        lambda: orgdeck.notifications.deliveries(channel_id=channel.id, status=RECOVERABLE, limit=1).total,
    )
    since_default = channel.disabled_at or datetime.now(UTC) - timedelta(days=1)
    with st.form(f"recover_{channel.id}", border=True):
        st.markdown(
            f"**Recover** · {waiting or 'no'} failed, dead or held deliver{'y' if waiting == 1 else 'ies'} "
            "to this channel. After an outage, send again everything that did not get through since it began."
        )
        day_col, time_col, button_col = st.columns([2, 2, 2], vertical_alignment="bottom")
        day = day_col.date_input(
            "Since (UTC day)",
            value=since_default.date(),
            format="YYYY-MM-DD",
            key=f"recover_{channel.id}_day",
        )
        moment = time_col.time_input(
            "Time (UTC)",
            value=since_default.time().replace(microsecond=0),
            key=f"recover_{channel.id}_time",
            step=60,
        )
        if button_col.form_submit_button(
            "Recover",
            icon=":material/replay:",
            width="stretch",
            **control("recover", disabled=channel.state == "disabled" or not waiting),
        ):
            since = datetime.combine(day, moment, tzinfo=UTC)
            try:
                recovered = orgdeck.notifications.recover(channel.id, since)
            except ApiError as error:
                show_error(error, "recover the deliveries")
            else:
                notify(
                    f"Queued {recovered.recovered} deliver{'y' if recovered.recovered == 1 else 'ies'} to "
                    f"**{channel.name}** made since {since:%Y-%m-%d %H:%M} UTC; they are sent now."
                )
        if channel.state == "disabled":
            st.caption("Enable the channel first: recovered deliveries are sent at once.")


def rotate(channel: Channel) -> None:
    """Rotate a webhook channel's signing secret, behind a confirmation; say while the last one signs."""
    until = channel.previous_secret_expires_at
    if until and until > datetime.now(UTC):
        st.caption(f"The previous secret still signs too until {until:%Y-%m-%d %H:%M} UTC.")
    warning = (
        f"Make a new signing secret for **{channel.name}**? It is shown once. For the grace period "
        "every delivery carries signatures by both the new and the current secret, so the receiver "
        "can switch over; after it, only the new one signs."
    )
    if confirmed(
        "Rotate signing secret", key=f"rotate_{channel.id}", warning=warning, **control("rotateSecret")
    ):
        try:
            rotated = orgdeck.notifications.rotate_secret(channel.id)
        except ApiError as error:
            show_error(error, "rotate the signing secret")
        else:
            until = rotated.previous_secret_expires_at
            st.session_state[ROTATED] = {
                "name": rotated.name,
                "secret": rotated.signing_secret,
                "until": f"{until:%Y-%m-%d %H:%M} UTC" if until else None,
            }
            notify(f"Rotated the signing secret of **{rotated.name}**.")


def rotated_secret() -> None:
    """A channel's new signing secret, on the run right after the rotation only."""
    rotated = st.session_state.pop(ROTATED, None)
    if rotated is None:
        return
    until = f" The previous one keeps signing too until {rotated['until']}." if rotated["until"] else ""
    st.warning(
        f"The new signing secret of **{rotated['name']}** is shown this once: put it in the receiver now.{until}",
        icon=":material/key:",
    )
    st.code(rotated["secret"], language=None)


def channels_section(channels: list[Channel], subscriptions: list[Subscription]) -> None:
    created_secret()
    rotated_secret()
    if channels:
        channels_table(channels, subscriptions)
    else:
        st.info("No channels yet. Create one: a webhook, a Slack incoming webhook or email recipients.")
    create_form(expanded=not channels)
    if channels:
        by_id = {c.id: c for c in channels}
        if st.session_state.get("channel_choice") not in by_id:
            st.session_state["channel_choice"] = channels[0].id
        chosen = st.selectbox(
            "Channel",
            list(by_id),
            format_func=lambda c: f"{by_id[c].name} ({by_id[c].kind})",
            key="channel_choice",
        )
        channel_controls(by_id[chosen])
        manage_channel(by_id[chosen], subscriptions)


# --- subscriptions ---------------------------------------------------------------------------------


def subscriptions_section(channels: list[Channel], subscriptions: list[Subscription]) -> None:
    if not channels:
        st.info("Create a channel first; then choose here which event types it receives.")
        return
    enabled = {(s.event_type, s.channel_id): s.enabled for s in subscriptions}
    matrix = pd.DataFrame(
        {c.id: [enabled.get((event_type, c.id), False) for event_type in EVENT_TYPES] for c in channels},
        index=pd.Index(EVENT_TYPES, name="Event type"),
    )
    st.caption("Tick an event type for each channel that should receive it, then apply the changes.")
    edited = st.data_editor(
        matrix,
        width="stretch",
        key=MATRIX,
        disabled=not may("subscribe"),
        column_config={
            c.id: st.column_config.CheckboxColumn(
                c.name + (" (disabled)" if c.state == "disabled" else ""),
                help=f"{KINDS[c.kind]}: {destination(c)}",
            )
            for c in channels
        },
    )
    changes = [
        (event_type, channel, bool(edited.at[event_type, channel.id]))
        for channel in channels
        for event_type in EVENT_TYPES
        if bool(edited.at[event_type, channel.id]) != bool(matrix.at[event_type, channel.id])
    ]
    paused = [(s.event_type, s.channel_id) for s in subscriptions if not s.enabled]
    if paused:
        names = {c.id: c.name for c in channels}
        listed = ", ".join(f"{names.get(c, c)} → `{e}`" for e, c in paused)
        st.caption(f"Paused through the API (shown unticked; ticking one enables it again): {listed}.")
    if st.button(
        f"Apply {len(changes)} change{'' if len(changes) == 1 else 's'}"
        if changes
        else "No changes to apply",
        type="primary",
        key="apply_subscriptions",
        **control("subscribe", disabled=not changes),
    ):
        apply_changes(changes)


def apply_changes(changes: list[tuple[str, Channel, bool]]) -> None:
    """Subscribe or unsubscribe each change; stop at the first refusal and say what was done."""
    done = []
    for event_type, channel, wanted in changes:
        verb, preposition = ("subscribe", "to") if wanted else ("unsubscribe", "from")
        try:
            if wanted:
                orgdeck.notifications.subscribe(channel.id, event_type)
            else:
                orgdeck.notifications.unsubscribe(channel.id, event_type)
        except ApiError as error:
            show_error(error, f"{verb} {channel.name} {preposition} {event_type}")
            if done:
                st.caption("Applied before that: " + "; ".join(done))
            return
        done.append(f"{verb}d **{channel.name}** {preposition} `{event_type}`")
    # The edits are applied: the matrix starts again from what the service now holds.
    st.session_state.pop(MATRIX, None)
    notify("Subscriptions saved: " + "; ".join(done) + ".")


# --- the page ---------------------------------------------------------------------------------------

st.title("Notifications")
st.caption(
    "Events (a deployment ending, an agent failing, drifting or going stale) are delivered to channels "
    "subscribed to them: webhooks, Slack and email. Every attempt is in the delivery log; failures are "
    "retried with backoff for about a day, then the delivery is dead."
)
show_notice()

period = st.radio(
    "Period",
    PERIODS,
    index=1,
    format_func=lambda d: f"Last {d} days",
    horizontal=True,
    key="notifications_period",
)
stats = load("count deliveries", lambda: orgdeck.notifications.log_stats(days=period))
channels = load("list channels", orgdeck.notifications.list_channels).items
subscriptions = load("list subscriptions", orgdeck.notifications.list_subscriptions).items

for channel in channels:
    if channel.state == "disabled":
        st.warning(
            f"Channel **{channel.name}** is disabled: {channel.disabled_reason}", icon=":material/block:"
        )
if not channels and not stats.per_channel:
    st.info(
        "Nothing is delivered yet: create a channel under **Channels** below, then choose its event types "
        "under **Subscriptions**.",
        icon=":material/notifications:",
    )
summary(stats)
charts(stats)
if current().embedded:
    st.caption(
        ":material/info: This is the embedded demo: the month before today is made-up history (with an "
        "outage and one dead delivery); what it delivers now goes to a receiver it runs on this machine."
    )
if st.session_state.get(OPEN_DELIVERY):
    delivery_detail(st.session_state[OPEN_DELIVERY])

deliveries_tab, log_tab, channels_tab, subscriptions_tab = st.tabs(
    ["Deliveries", "Delivery log", f"Channels ({len(channels)})", "Subscriptions"]
)
with deliveries_tab:
    deliveries_section(channels)
with log_tab:
    delivery_log(channels, stats)
with channels_tab:
    channels_section(channels, subscriptions)
with subscriptions_tab:
    subscriptions_section(channels, subscriptions)

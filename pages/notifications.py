"""Notifications: how deliveries are going, every delivery with what was sent and what came back
(resend), the log of attempts, channels (enable, disable, rename, recover an outage, rotate a
secret) and their subscriptions. Each tab's body is a module of components/notifications."""

from __future__ import annotations

import streamlit as st

from components.connection import client, current
from components.feedback import load, show_notice
from components.notifications.channels import channels_section
from components.notifications.deliveries import deliveries_section
from components.notifications.delivery import OPEN_DELIVERY, delivery_detail
from components.notifications.health import charts, summary
from components.notifications.log import delivery_log
from components.notifications.subscriptions import subscriptions_section

PERIODS = (7, 30, 90)

orgdeck = client()

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

"""The Channels tab: the channels with where they deliver and what they receive, the form for a new
one (its signing secret shown once), and the controls of the one chosen (channel_controls)."""

from __future__ import annotations

import re

import pandas as pd
import streamlit as st

from api import ApiError
from api.notifications import Channel, Subscription
from components.connection import client
from components.feedback import notify, plain
from components.formatting import ago
from components.forms import FormFields
from components.notifications.channel_controls import channel_controls, manage_channel, rotated_secret
from components.permissions import control

KINDS = {"webhook": "Webhook", "slack": "Slack", "email": "Email"}
CREATED = "created_channel"


def destination(channel: Channel) -> str:
    """Where a channel delivers, as the service shows it (a Slack URL by its host only)."""
    if channel.kind == "email":
        return ", ".join(channel.config.get("recipients", []))
    return str(channel.config.get("url", ""))


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
                    created = client().notifications.create_channel(
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

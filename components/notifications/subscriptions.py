"""The Subscriptions tab: which event types each channel receives, as a matrix of ticks whose
changes are applied together."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from api import ApiError
from api.events import EVENT_TYPES
from api.notifications import Channel, Subscription
from components.connection import client
from components.feedback import notify, show_error
from components.notifications.channels import KINDS, destination
from components.permissions import control, may

MATRIX = "subscription_matrix"


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
        **control(
            "subscribe",
            disabled=not changes,
            help=None if changes else "Tick or untick a box in the table first.",
        ),
    ):
        apply_changes(changes)


def apply_changes(changes: list[tuple[str, Channel, bool]]) -> None:
    """Subscribe or unsubscribe each change; stop at the first refusal and say what was done."""
    done = []
    for event_type, channel, wanted in changes:
        verb, preposition = ("subscribe", "to") if wanted else ("unsubscribe", "from")
        try:
            if wanted:
                client().notifications.subscribe(channel.id, event_type)
            else:
                client().notifications.unsubscribe(channel.id, event_type)
        except ApiError as error:
            show_error(error, f"{verb} {channel.name} {preposition} {event_type}")
            if done:
                st.caption("Applied before that: " + "; ".join(done))
            return
        done.append(f"{verb}d **{channel.name}** {preposition} `{event_type}`")
    # The edits are applied: the matrix starts again from what the service now holds.
    st.session_state.pop(MATRIX, None)
    notify("Subscriptions saved: " + "; ".join(done) + ".")

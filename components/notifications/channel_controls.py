"""One channel's controls, under the Channels tab's table: enable or disable it, rename it, recover
its deliveries since an outage began, rotate its signing secret, send it a test, delete it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import streamlit as st

from api import ApiError
from api.events import EVENT_TYPES
from api.notifications import Channel, Subscription
from components import layout
from components.confirm import confirmed
from components.connection import client
from components.feedback import load, notify, show_error
from components.permissions import control

ROTATED = "rotated_secret"
RECOVERABLE = ["failed", "dead", "held"]


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
            client().notifications.test_channel(channel.id, event_type=event_type)
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
            client().notifications.delete_channel(channel.id)
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
        client().notifications.update_channel(channel.id, name=name, enabled=enabled)
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
        lambda: client().notifications.deliveries(channel_id=channel.id, status=RECOVERABLE, limit=1).total,
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
        why_not = None
        if channel.state == "disabled":
            why_not = "Enable the channel first: a disabled channel receives nothing."
        elif not waiting:
            why_not = "Nothing to recover: no delivery of this channel failed, died or was held."
        if button_col.form_submit_button(
            "Recover",
            icon=":material/replay:",
            width="stretch",
            **control("recover", disabled=bool(why_not), help=why_not),
        ):
            since = datetime.combine(day, moment, tzinfo=UTC)
            try:
                recovered = client().notifications.recover(channel.id, since)
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
            rotated = client().notifications.rotate_secret(channel.id)
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

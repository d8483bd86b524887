"""The Deliveries tab: every delivery (one per event and channel) and its state, filtered, newest
first; a picked row, or a message id looked up, opens the delivery's detail."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from api.events import EVENT_TYPES
from api.notifications import DELIVERY_STATUSES, Channel, Delivery
from components.connection import client
from components.feedback import load
from components.notifications.delivery import OPEN_DELIVERY
from components.notifications.tables import ANY, DELIVERY_COLOURS, PAGE_SIZE, delivery_table
from components.paging import Pager, next_offset, offset_caption

DELIVERIES_PAGER = "deliveries_pager"


def deliveries_table(deliveries: list[Delivery]) -> None:
    """The page's deliveries; picking one opens its detail."""
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
    delivery_table(
        table,
        [d.id for d in deliveries],
        key="deliveries_table",
        colours=DELIVERY_COLOURS,
        column_config={
            "Created": st.column_config.DatetimeColumn(format="YYYY-MM-DD HH:mm:ss"),
            "Last answer": st.column_config.TextColumn(help="The HTTP status of the last attempt"),
            "Last error": st.column_config.TextColumn(width="large"),
            "Next attempt": st.column_config.TextColumn(help="When it is tried again (UTC)"),
        },
    )


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
        lambda: client().notifications.deliveries(
            status=statuses or None,
            channel_id=None if channel_id == ANY else channel_id,
            event_type=None if event_type == ANY else event_type,
            limit=PAGE_SIZE,
            offset=pager.offset,
        ),
    )
    if page.items:
        deliveries_table(page.items)
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
    find_form()


def find_form() -> None:
    """Open a delivery by the message id a receiver got."""
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

"""The Delivery log tab: every attempt, filtered by event type, channel (deleted ones too), status
and dates, newest first; a picked row opens its delivery's detail."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

import pandas as pd
import streamlit as st

from api.events import EVENT_TYPES
from api.notifications import LOG_STATUSES, Channel, LogEntry, LogStats
from components import layout
from components.connection import client
from components.dates import recent_days
from components.feedback import load
from components.notifications.tables import ANY, PAGE_SIZE, STATUS_COLOURS, delivery_table
from components.paging import Pager, next_offset, offset_caption

LOG_PAGER = "log_pager"
# The log's filters are kept in the URL (`bind="query-params"`): the Overview links to dead deliveries.
BOUND = "query-params"


def date_range(days: int) -> tuple[datetime | None, datetime | None]:
    """The picked UTC dates as [start, end) instants; the end date is included whole."""
    picked = recent_days("Dates (UTC)", days, key="log_dates", bind=True)
    if picked is None:
        return None, None
    first, last = picked
    return datetime.combine(first, time.min, tzinfo=UTC), datetime.combine(
        last + timedelta(days=1), time.min, tzinfo=UTC
    )


def log_table(entries: list[LogEntry]) -> None:
    """The attempts; picking one opens its delivery."""
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
    delivery_table(
        table,
        [entry.delivery_id for entry in entries],
        key="log_table",
        colours=STATUS_COLOURS,
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
        lambda: client().notifications.logs(
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
    log_table(page.items)
    pager.controls(
        next_offset(pager.offset, len(page.items), total),
        offset_caption(pager.offset, len(page.items), total, "attempts, newest first"),
    )

"""How deliveries are going over the period, above the Notifications page's tabs: tiles of the
attempts and their failure rate, and charts of the attempts per day and the failure rate per
channel."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from api.notifications import LOG_STATUSES, LogStats
from components import layout
from components.charts import AMBER, GREEN, PLOT_CONFIG, RED
from components.notifications.tables import STATUS_COLOURS

CHART_MARGIN = {"l": 10, "r": 10, "t": 56, "b": 10}
TILE_WIDTH = 200


def rate(failed: int, attempts: int) -> str:
    return f"{failed / attempts:.0%}" if attempts else "—"


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
    days_col.plotly_chart(per_day_figure(stats), width="stretch", config=PLOT_CONFIG)
    channels_col.plotly_chart(failure_rate_figure(stats), width="stretch", config=PLOT_CONFIG)

"""The Overview's heatmaps: deployments per environment and day or week, whose cells open their
jobs in the Jobs tab, and deployments by weekday and hour."""

from __future__ import annotations

from datetime import date, timedelta

import streamlit as st

from components.charts import METRIC_LABELS, MIN_RATE_SAMPLE, PLOT_CONFIG, heatmap_figure
from components.connection import client
from components.deployments.tabs import FAILED, open_jobs
from components.feedback import attempt

# What the heatmaps show and per what, chosen on the Overview and kept in the URL.
METRIC, BUCKET = "metric", "per"
HEATMAP = "heatmap_environment"


def open_cell() -> None:
    """The heatmap's callback: a click on a cell opens its jobs in the Jobs tab."""
    points = st.session_state[HEATMAP]["selection"]["points"]
    if not points:
        return
    environment_id, first = points[0]["customdata"]
    day = date.fromisoformat(first)
    last = day + timedelta(days=6) if st.session_state.get(BUCKET, "day") == "week" else day
    failed_only = st.session_state.get(METRIC, "count") != "count"
    open_jobs(environment_id=environment_id, statuses=FAILED if failed_only else [], days=(day, last))


def heatmap_legend(metric: str) -> None:
    rate = (
        f" · darker grey: fewer than {MIN_RATE_SAMPLE} jobs, too few for a rate"
        if metric == "failure_rate"
        else ""
    )
    scale = "green: none failed, to red" if metric != "count" else "light to dark blue: fewer to more jobs"
    st.caption(
        f"Light grey: no jobs{rate} · {scale}. Hover a cell for its jobs; click it to open them in **Jobs**."
    )


def environments_heatmap(metric: str, bucket: str, start: date, end: date) -> None:
    """Per environment and day (or week); a click on a cell opens its jobs."""
    by_day = attempt(
        "load the heatmap",
        lambda: client().deployments.heatmap(
            group_by="environment", bucket=bucket, metric=metric, start=start, end=end
        ),
    )
    if by_day is None:
        return
    st.markdown(f"**{METRIC_LABELS[metric]} per environment and {bucket}**")
    st.plotly_chart(
        heatmap_figure(by_day, clickable=True),
        width="stretch",
        config=PLOT_CONFIG,
        key=HEATMAP,
        on_select=open_cell,
        selection_mode="points",
    )
    heatmap_legend(metric)


def hours_heatmap(metric: str, start: date, end: date) -> None:
    """By weekday and hour (UTC): when deployments happen, and when they fail."""
    hours = attempt(
        "load the heatmap",
        lambda: client().deployments.heatmap(group_by="weekday_hour", metric=metric, start=start, end=end),
    )
    if hours is None:
        return
    st.markdown(f"**{METRIC_LABELS[metric]} by weekday and hour (UTC)**")
    st.plotly_chart(
        heatmap_figure(hours, height=340),
        width="stretch",
        config=PLOT_CONFIG,
        key="heatmap_hours",
    )

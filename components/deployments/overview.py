"""The Overview tab: how delivery is going between two dates (the metrics and the heatmaps) and
every agent's state in every environment now."""

from __future__ import annotations

from datetime import UTC, date, datetime

import streamlit as st

from api.deployments import DEFAULT_ANALYTICS_DAYS, MAX_ANALYTICS_DAYS
from components.charts import METRIC_LABELS
from components.connection import client
from components.dates import recent_days
from components.deployments.heatmaps import BUCKET, METRIC, environments_heatmap, hours_heatmap
from components.deployments.metrics import metric_tiles
from components.deployments.status import stale_setting, status_pane
from components.deployments.tabs import BOUND
from components.feedback import attempt

MATRIX_WIDTH, HOURS_WIDTH = 540, 360


def overview_controls() -> tuple[date, date, str, str]:
    """The dates, and what the heatmaps show per what: (start, end, metric, bucket)."""
    controls = st.container(horizontal=True, vertical_alignment="bottom", gap="medium")
    with controls:
        today = datetime.now(UTC).date()
        start, end = recent_days(
            "Dates", DEFAULT_ANALYTICS_DAYS, key="dates", at_most=MAX_ANALYTICS_DAYS, width=260, bind=True
        ) or (today, today)
    metric = controls.segmented_control(
        "Heatmap shows",
        list(METRIC_LABELS),
        format_func=METRIC_LABELS.get,
        default="count",
        required=True,
        key=METRIC,
        bind=BOUND,
    )
    bucket = controls.segmented_control(
        "Per", ["day", "week"], default="day", required=True, key=BUCKET, bind=BOUND
    )
    return start, end, metric, bucket


def overview_tab() -> None:
    start, end, metric, bucket = overview_controls()
    metrics = attempt("load the delivery metrics", lambda: client().deployments.metrics(start=start, end=end))
    if metrics is not None and metrics.totals.deployments == 0:
        st.info(
            "No deployments between these dates. Preview and deploy agents from the **Deploy** tab; "
            "the heatmaps and metrics fill in as jobs run."
        )
    elif metrics is not None:
        metric_tiles(metrics)
        environments_heatmap(metric, bucket, start, end)
    # Side by side in a wide window, one above the other in a narrow one.
    pair = st.container(horizontal=True, gap="large")
    matrix_col, hours_col = pair.container(width=MATRIX_WIDTH), pair.container(width=HOURS_WIDTH)
    with matrix_col:
        status_pane()
        stale_setting()
    with hours_col:
        if metrics is not None and metrics.totals.deployments:
            hours_heatmap(metric, start, end)

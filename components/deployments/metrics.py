"""The Overview's delivery metrics: a tile for each of DORA's four (and the median job duration),
with its trend and its line over the periods, and links to the jobs they count."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Literal, NamedTuple

import streamlit as st

from api.deployments import DeploymentMetrics, MetricsFigures
from components.deployments.tabs import FAILED, open_jobs
from components.formatting import short_duration

TILE_WIDTH = 222


class Tile(NamedTuple):
    """One metric: its figure over the dates, and how to pick and show it in each period."""

    label: str
    value: str
    pick: Callable[[MetricsFigures], float | None]
    show: Callable[[float], str]
    explained: str
    # More deployments is good news; more failures, slower jobs and restores are not.
    rise: Literal["normal", "inverse"] = "inverse"


def trend(values: list[float | None], show: Callable[[float], str]) -> str | None:
    """The change from the previous period to the latest one that has a value, signed."""
    known = [value for value in values if value is not None]
    if len(known) < 2:
        return None
    change = known[-1] - known[-2]
    return ("-" if change < 0 else "+") + show(abs(change))


def percent(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def per_day(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}/day"


def counted_days(metrics: DeploymentMetrics) -> str:
    """How many days the frequency averages over: from the first counted day to today or the end."""
    last = min(metrics.end, datetime.now(UTC).date())
    days = max((last - metrics.counted_from).days + 1, 1)
    return f"{days} day{'s' if days != 1 else ''}"


def tiles(metrics: DeploymentMetrics) -> list[Tile]:
    totals = metrics.totals
    since = (
        f" Counted from {metrics.counted_from}, the first deployment: days before it are not averaged in."
        if metrics.counted_from > metrics.start
        else ""
    )
    return [
        Tile(
            "Deployment frequency",
            f"{per_day(totals.deployments_per_day)} over {counted_days(metrics)}",
            lambda f: f.deployments_per_day,
            per_day,
            f"Successful (complete) jobs per elapsed day: {totals.successes} from {metrics.start} to "
            f"{metrics.end}, over the days that have passed.{since}",
            rise="normal",
        ),
        Tile(
            "Median lead time",
            short_duration(totals.lead_time),
            lambda f: f.lead_time,
            short_duration,
            "Lead time for changes: for each agent version that reaches a production environment "
            "(marked production, or the last on a promotion path), from the version's creation to its "
            "first complete deployment there, counted when it arrives; the exact median over those "
            "versions. Shows — until a version reaches a production environment within the dates.",
        ),
        Tile(
            "Change failure rate",
            percent(totals.change_failure_rate),
            lambda f: f.change_failure_rate,
            lambda v: f"{v * 100:.1f} pts",
            f"{totals.failures} of {totals.deployments} ended jobs failed in part or in full: the "
            "deployment-failure proxy (a deployment that succeeds and then misbehaves is not seen here).",
        ),
        Tile(
            "Median job duration",
            short_duration(totals.median_duration_seconds),
            lambda f: f.median_duration_seconds,
            short_duration,
            "From a worker starting a job to its end; within 4.4 % of the exact median.",
        ),
        Tile(
            "Median time to restore",
            short_duration(totals.median_time_to_restore_seconds),
            lambda f: f.median_time_to_restore_seconds,
            short_duration,
            "Per incident: from the end of the first failed job of a run to the end of the next "
            "complete job in the same environment; within 4.4 % of the exact median.",
        ),
    ]


def metric_tiles(metrics: DeploymentMetrics) -> None:
    periods = metrics.periods
    if metrics.end >= datetime.now(UTC).date():
        # Today is not over: the period that holds it would read as a sudden drop in deployments.
        periods = periods[:-1]
    against = (
        f" The arrow compares the latest complete {metrics.period} with the one before; "
        f"the line, every complete {metrics.period}."
    )
    # Tiles of a fixed width that wrap: all abreast in a wide window, two or three a row in a narrow one.
    row = st.container(horizontal=True, gap="small")
    for tile in tiles(metrics):
        series = [tile.pick(period) for period in periods]
        row.metric(
            tile.label,
            tile.value,
            delta=trend(series, tile.show),
            delta_color=tile.rise,
            chart_data=[v for v in series if v is not None] or None,
            chart_type="area",
            border=True,
            help=tile.explained + against,
            width=TILE_WIDTH,
        )
    counted_jobs(metrics)


def counted_jobs(metrics: DeploymentMetrics) -> None:
    """Buttons to the complete and the failed jobs the tiles count, in the Jobs tab."""
    totals = metrics.totals
    counted = st.container(horizontal=True, gap="small")
    days = (metrics.start, metrics.end)
    for label, statuses in (
        (f"Complete jobs ({totals.successes:,})", ["complete"]),
        (f"Failed jobs ({totals.failures:,})", FAILED),
    ):
        counted.button(
            label,
            icon=":material/list:",
            type="tertiary",
            on_click=open_jobs,
            kwargs={"statuses": statuses, "days": days},
            help="Open the jobs these figures count in the Jobs tab.",
        )

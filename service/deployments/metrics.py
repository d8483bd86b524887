"""Delivery metrics (DORA's four, as far as deployments show them), read from the metrics rollups.

- Deployment frequency: successful (complete) jobs per elapsed day, from the range's start or the
  environment's first deployment, whichever is later, to its end or today, whichever is earlier.
- Change failure rate: failed (error or partial) jobs among ended ones: the deployment-failure
  proxy, since a deployment that succeeds and then misbehaves is not seen here.
- Median duration: from a job's start to its end.
- Lead time for changes: see service.deployments.leadtime (its own rollup: one row per version
  and environment, filtered to the production ones on read; its medians are exact).
- Median time to restore: per incident, from the end of the first failed job of a run to the end
  of the next complete job in that environment, counted on the day that failure was created,
  whenever the restore came.

Counts are exact. Medians come from histograms (service.deployments.histograms): within one
bucket, 4.4 %, of the exact median. A period reads the month's rollup row when the range covers the
month up to today, else its days' rows, so a year by month reads about 13 rows per environment;
numpy sums their histograms and reads the medians. Answers are kept until the rollups change
(service.deployments.analytics_cache).
"""

from __future__ import annotations

import functools
import itertools
import json
import math
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session, aliased

from api.deployments import DeploymentMetrics, EnvironmentMetrics, MetricsPoint
from service.deployments import leadtime
from service.deployments.analytics_cache import kept_answer
from service.deployments.histograms import medians, sparse
from service.deployments.models import DeploymentMetricRollupRow, DeploymentMonthRollupRow
from service.deployments.ranges import (
    analysed_environments,
    analytics_range,
    days_outside,
    next_period,
    period_start,
    period_starts,
    stretch_rows,
    whole_months,
)
from service.storage.db import utcnow


def metrics(
    session: Session,
    *,
    org_id: str,
    period: str,
    start: date | None,
    end: date | None,
    environment_id: str | None,
) -> str:
    """Deployments, successes, failures and the four metrics: over the range, per period, and the
    same per environment, as JSON text (`DeploymentMetrics`), kept between requests until the
    rollups change (service.deployments.analytics_cache)."""
    start, end = analytics_range(start, end)
    environments = analysed_environments(session, org_id=org_id, environment_id=environment_id)
    shown = tuple((environment["id"], environment["name"]) for environment in environments)
    # Marking an environment production changes lead times but no rollup: it is part of the question.
    production = leadtime.production_environments(session, org_id=org_id)
    request = ("metrics", period, start, end, environment_id, shown, production)

    def make() -> str:
        answer = _metrics(session, org_id, period, start, end, environment_id, environments, production)
        return answer.model_dump_json()

    return kept_answer(session, org_id, request, make)


def _metrics(
    session: Session,
    org_id: str,
    period: str,
    start: date,
    end: date,
    environment_id: str | None,
    environments: list[dict[str, str]],
    production: tuple[str, ...],
) -> DeploymentMetrics:
    firsts = period_starts(start, end, period)
    ids = [environment["id"] for environment in environments]
    lead_times = leadtime.median_lead_times(
        session,
        org_id=org_id,
        production=[e for e in production if environment_id in (None, e)],
        environments=ids,
        firsts=firsts,
        start=start,
        end=end,
    )
    summed = _summed(
        _read(session, org_id, environment_id, start, end, period, ids, firsts), len(ids), len(firsts)
    )
    began = _first_days(session, org_id, environment_id)
    counted_from = {key: max(start, day) for key, day in began.items()}
    counted_from[None] = max(start, min(began.values())) if began else start
    until = min(end, utcnow().date())
    everywhere, all_periods = len(ids), len(firsts)

    def figures(environment: int, period_index: int) -> dict[str, Any]:
        since = counted_from.get(ids[environment] if environment < everywhere else None, start)
        if period_index < all_periods:
            first = firsts[period_index]
            since, last = max(since, first), min(until, next_period(first, period) - timedelta(days=1))
        else:
            last = until
        counted = summed.figures(environment, period_index, (last - since).days + 1)
        lead_time = lead_times.get((environment, period_index))
        return counted | {"lead_time": round(lead_time, 3) if lead_time is not None else None}

    return DeploymentMetrics(
        period=period,
        start=start,
        end=end,
        counted_from=counted_from[None],
        totals=figures(everywhere, all_periods),
        periods=[
            MetricsPoint(period_start=first, **figures(everywhere, index))
            for index, first in enumerate(firsts)
        ],
        environments=[
            EnvironmentMetrics(
                environment_id=environment["id"],
                environment_name=environment["name"],
                counted_from=counted_from.get(environment["id"], start),
                periods=[
                    MetricsPoint(period_start=first, **figures(position, index))
                    for index, first in enumerate(firsts)
                ],
                **figures(position, all_periods),
            )
            for position, environment in enumerate(environments)
        ],
    )


@dataclass(frozen=True)
class _Row:
    """A rollup row the range reads, placed on the answer's grid."""

    environment: int
    period: int
    jobs: int
    successes: int
    failures: int
    durations: str
    restores: str


def _read(
    session: Session,
    org_id: str,
    environment_id: str | None,
    start: date,
    end: date,
    period: str,
    environments: list[str],
    firsts: list[date],
) -> list[_Row]:
    """Every rollup row the range needs: a month's own row where a month period covers all of the
    month that has happened, else each day's."""
    model = DeploymentMetricRollupRow
    months = whole_months(start, end) if period == "month" else []
    stretches = [("day", first, last) for first, last in days_outside(start, end, months)]
    if months:
        stretches.append(("month", months[0], months[-1]))
    columns = [
        model.environment_id,
        model.start,
        model.jobs,
        model.successes,
        model.failures,
        model.durations,
        model.restores,
    ]
    query = stretch_rows(model, columns, org_id, stretches, environment_id)
    environment_at = {environment: index for index, environment in enumerate(environments)}
    period_at = {first: index for index, first in enumerate(firsts)}
    return [
        _Row(environment_at[environment], period_at[period_start(first, period)], *counts)
        for environment, first, *counts in session.execute(query)
    ]


@dataclass(frozen=True)
class _Summed:
    """Counts and medians of every (environment, period) cell, where one more environment stands
    for all of them and one more period for the whole range: cell (e, p) is e * (periods + 1) + p."""

    periods: int
    counts: np.ndarray  # per cell: jobs, successes, failures
    durations: np.ndarray  # per cell: the median, NaN without samples
    restores: np.ndarray

    def figures(self, environment: int, period: int, days: int) -> dict[str, Any]:
        cell = environment * (self.periods + 1) + period
        jobs, successes, failures = (int(count) for count in self.counts[cell])
        return {
            "deployments": jobs,
            "successes": successes,
            "failures": failures,
            "deployments_per_day": round(successes / days, 4) if days > 0 else None,
            "change_failure_rate": round(failures / jobs, 4) if jobs else None,
            "median_duration_seconds": _seconds(self.durations[cell]),
            "median_time_to_restore_seconds": _seconds(self.restores[cell]),
        }


def _summed(rows: list[_Row], environments: int, periods: int) -> _Summed:
    """The rows summed into every cell: each row counts in its own, its environment's over the
    range, its period's over every environment, and the whole's."""
    width = periods + 1
    environment = np.fromiter((row.environment for row in rows), np.int64, len(rows))
    period = np.fromiter((row.period for row in rows), np.int64, len(rows))
    cells = np.concatenate(
        [
            environment * width + period,
            environment * width + periods,
            environments * width + period,
            np.full(len(rows), environments * width + periods),
        ]
    )
    size = (environments + 1) * width
    counts = np.stack(
        [
            np.bincount(cells, weights=np.tile([getattr(row, name) for row in rows], 4), minlength=size)
            for name in ("jobs", "successes", "failures")
        ],
        axis=1,
    )
    durations, restores = (_medians(rows, name, environments, periods) for name in ("durations", "restores"))
    return _Summed(periods, counts, durations, restores)


def _medians(rows: list[_Row], name: str, environments: int, periods: int) -> np.ndarray:
    """The medians of every cell (as `_Summed` lays them out) of the histograms in column `name`.

    Each environment's histograms are summed into a dense grid, a row per period and one for the
    range, as wide as the buckets in use; the grids' sum is every environment's. Numpy adds them
    up and reads the medians of every row at once."""
    width = periods + 1
    found = np.full((environments + 1) * width, np.nan)
    rows = sorted(rows, key=lambda row: row.environment)
    parsed = [_parsed(getattr(row, name)) for row in rows]
    lengths = np.fromiter((len(buckets) for buckets, _ in parsed), np.int64, len(parsed))
    if not lengths.sum():
        return found
    buckets = np.concatenate([buckets for buckets, _ in parsed])
    samples = np.concatenate([samples for _, samples in parsed])
    low = int(buckets.min())
    span = int(buckets.max()) - low + 1
    places = np.repeat(np.fromiter((row.period for row in rows), np.int64, len(rows)), lengths) * span
    places += buckets - low
    # Where each environment's entries begin and end (the rows are in environment order).
    owners = np.repeat(np.fromiter((row.environment for row in rows), np.int64, len(rows)), lengths)
    bounds = np.searchsorted(owners, np.arange(environments + 1))
    everywhere = np.zeros((width, span))
    for environment, (first, last) in enumerate(itertools.pairwise(bounds)):
        if first == last:
            continue
        grid = np.bincount(places[first:last], weights=samples[first:last], minlength=periods * span)
        grid = grid.reshape(periods, span)
        grid = np.vstack([grid, grid.sum(axis=0)])
        found[environment * width : (environment + 1) * width] = medians(grid, low)
        everywhere += grid
    found[environments * width :] = medians(everywhere, low)
    return found


@functools.lru_cache(maxsize=8192)
def _parsed(text: str) -> tuple[np.ndarray, np.ndarray]:
    """A histogram parsed once per text (never changed by its readers): past months' and days'
    rows seldom change."""
    return sparse(text)


def _seconds(value: float) -> float | None:
    return None if math.isnan(value) else round(float(value), 3)


def _first_days(session: Session, org_id: str, environment_id: str | None) -> dict[str, date]:
    """The UTC day of each environment's first ended job, read from its first month row (one
    primary-key seek per environment, however many jobs there are)."""
    model, earlier = DeploymentMonthRollupRow, aliased(DeploymentMonthRollupRow)
    first_month = (
        select(func.min(earlier.month))
        .where(earlier.org_id == model.org_id, earlier.environment_id == model.environment_id)
        .scalar_subquery()
    )
    query = select(model.environment_id, model.month, model.jobs).where(
        model.org_id == org_id, model.month == first_month
    )
    if environment_id is not None:
        query = query.where(model.environment_id == environment_id)
    days = {}
    for environment, month, jobs in session.execute(query):
        counts = json.loads(jobs)
        days[environment] = month + timedelta(days=next((i for i, count in enumerate(counts) if count), 0))
    return days

"""Delivery metrics (DORA's four, as far as deployments show them), read from the metrics rollups.

- Deployment frequency: successful (complete) jobs per elapsed day, from the range's start or the
  environment's first deployment, whichever is later, to its end or today, whichever is earlier.
- Change failure rate: failed (error or partial) jobs among ended ones: the deployment-failure
  proxy, since a deployment that succeeds and then misbehaves is not seen here.
- Median duration: from a job's start to its end.
- Median time to restore: per incident, from the end of the first failed job of a run to the end
  of the next complete job in that environment, counted on the day that failure was created,
  whenever the restore came.

Counts are exact. Medians come from histograms (service.deployments.histograms): within one
bucket, 4.4 %, of the exact median. A period reads the month's rollup row when the range covers the
month up to today, else its days' rows, so a year by month reads about 13 rows per environment.
"""

from __future__ import annotations

import functools
import json
from collections import defaultdict
from collections.abc import Iterable
from datetime import date, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session, aliased

from api.deployments import DeploymentMetrics, EnvironmentMetrics, MetricsPoint
from service.db import utcnow
from service.deployments.answers import kept_answer
from service.deployments.histograms import Histogram, median, merged, parse
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
from service.deployments.rollups import MetricsCount

# Rows keyed by (environment, period start); None as environment or period: all of them.
Counted = dict[tuple[str | None, date | None], MetricsCount]


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
    rollups change (service.deployments.answers)."""
    start, end = analytics_range(start, end)
    environments = analysed_environments(session, org_id=org_id, environment_id=environment_id)
    shown = tuple((environment["id"], environment["name"]) for environment in environments)
    request = ("metrics", period, start, end, environment_id, shown)

    def make() -> str:
        return _metrics(session, org_id, period, start, end, environment_id, environments).model_dump_json()

    return kept_answer(session, org_id, request, make)


def _metrics(
    session: Session,
    org_id: str,
    period: str,
    start: date,
    end: date,
    environment_id: str | None,
    environments: list[dict[str, str]],
) -> DeploymentMetrics:
    firsts = period_starts(start, end, period)
    counted = _summed(_read(session, org_id, environment_id, start, end, period, firsts))
    began = _first_days(session, org_id, environment_id)
    counted_from = {key: max(start, day) for key, day in began.items()}
    counted_from[None] = max(start, min(began.values())) if began else start
    until = min(end, utcnow().date())

    def figures(environment: str | None, first: date | None) -> dict[str, Any]:
        since = counted_from.get(environment, start)
        if first is not None:
            since, last = max(since, first), min(until, next_period(first, period) - timedelta(days=1))
        else:
            last = until
        return _figures(counted.get((environment, first)) or MetricsCount(), (last - since).days + 1)

    return DeploymentMetrics(
        period=period,
        start=start,
        end=end,
        counted_from=counted_from[None],
        totals=figures(None, None),
        periods=[MetricsPoint(period_start=first, **figures(None, first)) for first in firsts],
        environments=[
            EnvironmentMetrics(
                environment_id=environment["id"],
                environment_name=environment["name"],
                counted_from=counted_from.get(environment["id"], start),
                periods=[
                    MetricsPoint(period_start=first, **figures(environment["id"], first)) for first in firsts
                ],
                **figures(environment["id"], None),
            )
            for environment in environments
        ],
    )


def _figures(count: MetricsCount, days: int) -> dict[str, Any]:
    return {
        "deployments": count.jobs,
        "successes": count.successes,
        "failures": count.failures,
        "deployments_per_day": round(count.successes / days, 4) if days > 0 else None,
        "change_failure_rate": round(count.failures / count.jobs, 4) if count.jobs else None,
        "median_duration_seconds": _seconds(median(count.durations)),
        "median_time_to_restore_seconds": _seconds(median(count.restores)),
    }


def _seconds(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _read(
    session: Session,
    org_id: str,
    environment_id: str | None,
    start: date,
    end: date,
    period: str,
    firsts: list[date],
) -> Iterable[tuple[str, date, MetricsCount]]:
    """(environment, period start, its counts) of every rollup row the range needs: a month's own
    row where a month period covers all of the month that has happened, else each day's."""
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
    for environment, first, jobs, successes, failures, durations, restores in session.execute(query):
        counts = MetricsCount(jobs, successes, failures, _parsed(durations), _parsed(restores))
        yield environment, period_start(first, period), counts


@functools.lru_cache(maxsize=8192)
def _parsed(text: str) -> Histogram:
    """A histogram parsed once per text (never changed by its readers): past months' and days'
    rows seldom change."""
    return parse(text)


def _summed(rows: Iterable[tuple[str, date, MetricsCount]]) -> Counted:
    """The rows summed per (environment, period), then from those sums per environment, per period
    and in all: each row's histograms are merged once, not once per level."""
    cells = _sum_by(((environment, first), count) for environment, first, count in rows)
    coarser = (
        (key, count)
        for (environment, first), count in cells.items()
        for key in ((environment, None), (None, first), (None, None))
    )
    return cells | _sum_by(coarser)


def _sum_by(keyed: Iterable[tuple[tuple[str | None, date | None], MetricsCount]]) -> Counted:
    parts: dict[tuple[str | None, date | None], list[MetricsCount]] = defaultdict(list)
    for key, count in keyed:
        parts[key].append(count)
    return {
        key: MetricsCount(
            sum(count.jobs for count in counts),
            sum(count.successes for count in counts),
            sum(count.failures for count in counts),
            merged(count.durations for count in counts),
            merged(count.restores for count in counts),
        )
        for key, counts in parts.items()
    }


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

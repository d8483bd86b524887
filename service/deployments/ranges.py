"""The ranges deployment analytics cover: inclusive UTC days, cut into days, ISO weeks or months,
and the environments they are read for."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from sqlalchemy import CompoundSelect, select, union_all
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from api.deployments import (
    DEFAULT_ANALYTICS_DAYS,
    MAX_ANALYTICS_DAYS,
)
from service.environments.models import EnvironmentRow
from service.errors import InvalidInput
from service.storage.db import utcnow


def analytics_range(start: date | None, end: date | None) -> tuple[date, date]:
    """The inclusive UTC days asked for: up to today, and DEFAULT_ANALYTICS_DAYS long, by default."""
    end = end or utcnow().date()
    start = start or end - timedelta(days=DEFAULT_ANALYTICS_DAYS - 1)
    if start > end:
        raise InvalidInput(f"end ({end}) is before start ({start})", field="end")
    days = (end - start).days + 1
    if days > MAX_ANALYTICS_DAYS:
        raise InvalidInput(
            f"The range {start}..{end} covers {days} days; at most {MAX_ANALYTICS_DAYS}", field="start"
        )
    return start, end


def bounds(start: date, end: date) -> tuple[datetime, datetime]:
    """The first instant of `start` and the first instant after `end`, in UTC."""
    since = datetime.combine(start, time.min, tzinfo=UTC)
    return since, since + timedelta(days=(end - start).days + 1)


def period_starts(start: date, end: date, period: str) -> list[date]:
    """The start of every day, ISO week (from Monday) or month that meets start..end."""
    if period == "day":
        return [start + timedelta(days=n) for n in range((end - start).days + 1)]
    first = period_start(start, period)
    starts = []
    while first <= end:
        starts.append(first)
        first = next_period(first, period)
    return starts


def period_start(day: date, period: str) -> date:
    if period == "week":
        return day - timedelta(days=day.weekday())
    if period == "month":
        return day.replace(day=1)
    return day


def next_period(first: date, period: str) -> date:
    if period == "month":
        return (first + timedelta(days=32)).replace(day=1)
    return first + timedelta(days=7 if period == "week" else 1)


def days_within(first: date, period: str, start: date, end: date) -> int:
    """How many days of the bucket starting at `first` fall in start..end."""
    last = next_period(first, period) - timedelta(days=1)
    return (min(last, end) - max(first, start)).days + 1


def whole_months(start: date, end: date) -> list[date]:
    """The months the range covers from their first day to their last or to today: a month's row
    counts them all (no job is created after today)."""
    today = utcnow().date()
    return [
        first
        for first in period_starts(start, end, "month")
        if start <= first and min(next_period(first, "month") - timedelta(days=1), today) <= end
    ]


def days_outside(start: date, end: date, months: list[date]) -> list[tuple[date, date]]:
    """The stretches of start..end outside the (consecutive) whole months."""
    if not months:
        return [(start, end)]
    after = next_period(months[-1], "month")
    stretches = [(start, months[0] - timedelta(days=1)), (after, end)]
    return [(first, last) for first, last in stretches if first <= last]


def stretch_rows(
    model: Any,
    columns: Sequence[ColumnElement[Any]],
    org_id: Any,
    stretches: Sequence[tuple[str, Any, Any]],
    environment_id: Any = None,
) -> CompoundSelect[Any]:
    """`columns` of a day-and-month rollup's rows in each (span, first, last) stretch: one index
    range each, joined by UNION ALL (an OR of ranges would read every row of the org)."""
    environment = [] if environment_id is None else [model.environment_id == environment_id]
    return union_all(
        *(
            select(*columns).where(
                model.org_id == org_id, model.span == span, model.start.between(first, last), *environment
            )
            for span, first, last in stretches
        )
    )


def analysed_environments(
    session: Session, *, org_id: str, environment_id: str | None
) -> list[dict[str, str]]:
    """The org's environments by name (only the one asked for, when one is); an unknown one is a 400."""
    query = select(EnvironmentRow.id, EnvironmentRow.name).where(EnvironmentRow.org_id == org_id)
    if environment_id is not None:
        query = query.where(EnvironmentRow.id == environment_id)
    found = [{"id": id_, "name": name} for id_, name in session.execute(query.order_by(EnvironmentRow.name))]
    if environment_id is not None and not found:
        raise InvalidInput(
            f"environmentId '{environment_id}' names no environment of this organization",
            field="environmentId",
        )
    return found

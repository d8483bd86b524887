"""Deployment analytics: heatmaps and delivery metrics, aggregated by the database.

A job is counted once it has ended, on the UTC day and hour it was created. Two rollups hold those
counts per environment: by month, a number per day (the day and week heatmaps), and hourly (the
weekday-by-hour heatmap). The worker adds each job to them in the transaction that ends it
(`record_job_end`); loads that write jobs without the worker call `rebuild_rollups`. So a year of
twenty environments is 260 month rows to read, whatever the number of jobs. The agent heatmap and
the metrics read the jobs through their (org, created_at) indexes: a median needs every value,
not a sum.
"""

from __future__ import annotations

import calendar
import functools
import itertools
import json
from collections.abc import Sequence
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from sqlalchemy import (
    BindParameter,
    Date,
    DateTime,
    Float,
    Integer,
    Select,
    Subquery,
    Text,
    bindparam,
    case,
    cast,
    delete,
    extract,
    func,
    insert,
    literal_column,
    null,
    select,
    text,
    union_all,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.orm import Session, aliased
from sqlalchemy.sql.elements import ColumnElement

from api.deployments import (
    DEFAULT_ANALYTICS_DAYS,
    FINISHED_JOB_STATUSES,
    MAX_ANALYTICS_DAYS,
    DeploymentMetrics,
    EnvironmentMetrics,
    Heatmap,
    HeatmapAxisItem,
    MetricsPoint,
)
from service.agents.models import AgentRow
from service.db import dialect_name, utcnow
from service.deployments.models import (
    DeploymentHourlyRollupRow,
    DeploymentJobAgentRow,
    DeploymentJobRow,
    DeploymentMonthRollupRow,
)
from service.environments.models import EnvironmentRow
from service.errors import InvalidInput

FAILED_JOB_STATUSES = ("error", "partial")
ENDED = sorted(FINISHED_JOB_STATUSES)
WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
HOURS = tuple(f"{hour:02d}" for hour in range(24))
# The two kinds of samples the metrics take medians of: job durations and times to restore.
DURATION, RESTORE = 0, 1

# --- Rollups -----------------------------------------------------------------------------------


def record_job_end(session: Session, job: DeploymentJobRow) -> None:
    """Count a job that has just ended in the rollups of the UTC day and hour it was created."""
    created = job.created_at.astimezone(UTC)
    day = created.date()
    keys: dict[str, Any] = {"org_id": job.org_id, "environment_id": job.environment_id, "day": day}
    counts = {"jobs": 1, "failures": int(job.status in FAILED_JOB_STATUSES)}
    _increment(session, DeploymentHourlyRollupRow, keys | {"hour": created.hour}, counts)
    _increment_day_of_month(session, job.org_id, job.environment_id, day, counts)


def _increment(session: Session, model: type[Any], keys: dict[str, Any], counts: dict[str, int]) -> None:
    """Add `counts` to the row at `keys`: one statement, safe under concurrent workers."""
    dialect = postgresql if dialect_name(session) == "postgresql" else sqlite
    statement = dialect.insert(model).values(**keys, **counts)
    added = {name: getattr(model, name) + getattr(statement.excluded, name) for name in counts}
    session.execute(statement.on_conflict_do_update(index_elements=list(keys), set_=added))


def _increment_day_of_month(
    session: Session, org_id: str, environment_id: str, day: date, counts: dict[str, int]
) -> None:
    """Add `counts` to the day's place in its month row: one statement, like `_increment`."""
    month, index = day.replace(day=1), day.day - 1
    model, dialect = DeploymentMonthRollupRow, dialect_name(session)
    first = {name: _month_text(month, {index: count}) for name, count in counts.items()}
    statement = (postgresql if dialect == "postgresql" else sqlite).insert(model)
    statement = statement.values(org_id=org_id, environment_id=environment_id, month=month, **first)
    added = {name: _add_at(dialect, getattr(model, name), index, count) for name, count in counts.items()}
    session.execute(
        statement.on_conflict_do_update(index_elements=["org_id", "environment_id", "month"], set_=added)
    )


def _add_at(dialect: str, numbers: ColumnElement[str], index: int, count: int) -> ColumnElement[str]:
    """The JSON array `numbers` with `count` added to its element at `index`."""
    if dialect == "postgresql":
        array = cast(numbers, JSONB)
        element = cast(array[index].astext, Integer) + count
        path = cast(literal_column(f"'{{{index}}}'"), ARRAY(Text))
        return cast(func.jsonb_set(array, path, func.to_jsonb(element)), Text)
    path = literal_column(f"'$[{index}]'")
    return func.json_set(numbers, path, func.json_extract(numbers, path) + count)


def _month_text(month: date, counts: dict[int, int]) -> str:
    """A month's numbers as JSON: `counts` by day index, zero elsewhere."""
    numbers = [counts.get(index, 0) for index in range(calendar.monthrange(month.year, month.month)[1])]
    return json.dumps(numbers, separators=(",", ":"))


def rebuild_rollups(session: Session, *, org_id: str) -> None:
    """Recount the org's rollups from its jobs, for loads that write jobs without the worker."""
    hourly, monthly = DeploymentHourlyRollupRow, DeploymentMonthRollupRow
    dialect = dialect_name(session)
    if dialect == "postgresql":
        # Job ends wait until the recount commits (SQLite has one writer anyway): a job ending
        # meanwhile is counted once, by the recount or on top of it, never twice or lost.
        tables = f"{hourly.__tablename__}, {monthly.__tablename__}"
        session.execute(text(f"LOCK TABLE {tables} IN SHARE ROW EXCLUSIVE MODE"))
    session.execute(delete(hourly).where(hourly.org_id == org_id))
    session.execute(delete(monthly).where(monthly.org_id == org_id))
    job = DeploymentJobRow
    day, hour = _utc_day(dialect, job.created_at), _utc_hour(dialect, job.created_at)
    per_hour = (
        select(job.org_id, job.environment_id, day, hour, func.count(), func.sum(_failed(job.status)))
        .where(job.org_id == org_id, job.status.in_(ENDED))
        .group_by(job.org_id, job.environment_id, day, hour)
    )
    columns = ["org_id", "environment_id", "day", "hour", "jobs", "failures"]
    session.execute(insert(hourly).from_select(columns, per_hour))
    months: dict[tuple[str, date], tuple[dict[int, int], dict[int, int]]] = {}
    per_day = (
        select(hourly.environment_id, hourly.day, func.sum(hourly.jobs), func.sum(hourly.failures))
        .where(hourly.org_id == org_id)
        .group_by(hourly.environment_id, hourly.day)
    )
    for environment_id, day, jobs, failures in session.execute(per_day):
        counts = months.setdefault((environment_id, day.replace(day=1)), ({}, {}))
        counts[0][day.day - 1], counts[1][day.day - 1] = jobs, failures
    rows = [
        {"org_id": org_id, "environment_id": environment_id, "month": month}
        | {"jobs": _month_text(month, jobs), "failures": _month_text(month, failures)}
        for (environment_id, month), (jobs, failures) in months.items()
    ]
    if rows:
        session.execute(insert(monthly), rows)


# --- Ranges ------------------------------------------------------------------------------------


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


def _bounds(start: date, end: date) -> tuple[datetime, datetime]:
    """The first instant of `start` and the first instant after `end`, in UTC."""
    since = datetime.combine(start, time.min, tzinfo=UTC)
    return since, since + timedelta(days=(end - start).days + 1)


def _bucket_starts(start: date, end: date, period: str) -> list[date]:
    """The start of every day, ISO week (from Monday) or month that meets start..end."""
    if period == "day":
        return [start + timedelta(days=n) for n in range((end - start).days + 1)]
    first = _bucket_start(start, period)
    starts = []
    while first <= end:
        starts.append(first)
        first = _next_bucket(first, period)
    return starts


def _bucket_start(day: date, period: str) -> date:
    if period == "week":
        return day - timedelta(days=day.weekday())
    if period == "month":
        return day.replace(day=1)
    return day


def _next_bucket(first: date, period: str) -> date:
    if period == "month":
        return (first + timedelta(days=32)).replace(day=1)
    return first + timedelta(days=7 if period == "week" else 1)


def _days_within(first: date, period: str, start: date, end: date) -> int:
    """How many days of the bucket starting at `first` fall in start..end."""
    last = _next_bucket(first, period) - timedelta(days=1)
    return (min(last, end) - max(first, start)).days + 1


# --- Heatmaps ----------------------------------------------------------------------------------


def heatmap(
    session: Session,
    *,
    org_id: str,
    group_by: str,
    bucket: str,
    metric: str,
    start: date | None,
    end: date | None,
    environment_id: str | None,
) -> str:
    """The heatmap as JSON text (a `Heatmap`).

    A year of days by twenty environments is 7,300 numbers of each kind: they go from the month
    rows to the answer as text, never as Python numbers. The other grids are a few thousand cells
    at most, counted by the database and laid out here.
    """
    start, end = analytics_range(start, end)
    environments = _environments(session, org_id=org_id, environment_id=environment_id)
    if group_by == "environment":
        rows, columns = environments, list(_time_axis(start, end, bucket))
        months = _month_rows(session, org_id, start, end, environment_id)
        spans = _month_spans(start, end)
        if bucket == "day":
            counts, failures = _by_day(months, spans, environments)
        else:
            counts, failures = _by_week(months, spans, environments, start)
    else:
        cells = _cells(session, org_id, group_by, start, end, environment_id)
        if group_by == "agent":
            rows, columns = _agent_rows(session, org_id, cells), environments
        else:
            rows, columns = _axis(WEEKDAYS), _axis(HOURS)
        counts, failures = _lay_out(cells, [row["id"] for row in rows], [column["id"] for column in columns])
    # One validation of plain data (and of the time axis's models, made once per range).
    frame = Heatmap.model_validate(
        {
            "group_by": group_by,
            "bucket": bucket,
            "metric": metric,
            "start": start,
            "end": end,
            "rows": rows,
            "columns": columns,
            "counts": [],
            "failures": [],
            "values": [],
        }
    )
    # The grids are the model's last fields: the frame's JSON ends with them, empty.
    head = frame.model_dump_json().removesuffix(EMPTY_GRIDS)
    values = _values(metric, counts, failures)
    return f'{head}"counts":{counts},"failures":{failures},"values":{values}}}'


EMPTY_GRIDS = '"counts":[],"failures":[],"values":[]}'


# A month of one environment in the month rollup: its jobs and failures (JSON arrays, a number per
# day), None for a month without jobs.
MonthTexts = tuple[str | None, str | None]


def _month_rows(
    session: Session, org_id: str, start: date, end: date, environment_id: str | None
) -> dict[tuple[str, date], MonthTexts]:
    """The month rows that meet start..end, by (environment, month)."""
    values = {"org_id": org_id, "first_month": start.replace(day=1), "end": end}
    if environment_id is not None:
        values["environment_id"] = environment_id
    statement = _months_statement(filtered=environment_id is not None)
    return {
        (row_environment, month): (jobs, failures)
        for row_environment, month, jobs, failures in session.execute(statement, values)
    }


def _month_spans(start: date, end: date) -> list[tuple[date, int, int, int]]:
    """Each month that meets start..end, with the days of it in range (from index `first` to
    before `last`) and its length: (month, first, last, days)."""
    spans = []
    for month in _bucket_starts(start, end, "month"):
        days = calendar.monthrange(month.year, month.month)[1]
        first = start.day - 1 if month == start.replace(day=1) else 0
        spans.append((month, first, end.day if month == end.replace(day=1) else days, days))
    return spans


def _by_day(
    months: dict[tuple[str, date], MonthTexts],
    spans: list[tuple[date, int, int, int]],
    environments: list[dict[str, str]],
) -> tuple[str, str]:
    """Jobs and failures per environment (row) and day (column), as two JSON grids made of the
    month rows' text: only the range's first and last months are cut."""
    grids: tuple[list[str], list[str]] = ([], [])
    for environment in environments:
        texts = [months.get((environment["id"], month), (None, None)) for month, *_ in spans]
        for kind, grid in enumerate(grids):
            parts = (
                _month_slice(pair[kind], first, last, days)
                for pair, (_, first, last, days) in zip(texts, spans, strict=True)
            )
            grid.append("[" + ",".join(parts) + "]")
    counts, failures = ("[" + ",".join(grid) + "]" for grid in grids)
    return counts, failures


def _by_week(
    months: dict[tuple[str, date], MonthTexts],
    spans: list[tuple[date, int, int, int]],
    environments: list[dict[str, str]],
    start: date,
) -> tuple[str, str]:
    """Jobs and failures per environment and week (from Monday), as two JSON grids: each week sums
    its days in range."""
    length = sum(last - first for _, first, last, _ in spans)
    # Where each week's days begin among the range's days, and where the last one ends.
    edges = [0, *range(7 - start.weekday(), length, 7), length]
    grids: tuple[list[list[int]], list[list[int]]] = ([], [])
    for environment in environments:
        texts = [months.get((environment["id"], month), (None, None)) for month, *_ in spans]
        for kind, grid in enumerate(grids):
            daily = itertools.chain.from_iterable(
                _numbers(pair[kind], days)[first:last]
                for pair, (_, first, last, days) in zip(texts, spans, strict=True)
            )
            running = [0, *itertools.accumulate(daily)]
            grid.append([running[end] - running[begin] for begin, end in itertools.pairwise(edges)])
    return _compact(grids[0]), _compact(grids[1])


@functools.lru_cache(maxsize=4096)
def _numbers(text: str | None, days: int) -> tuple[int, ...]:
    """A month's numbers, parsed once per text: a month's text seldom changes once it is over, and
    a year by week would otherwise parse 14,600 numbers a request."""
    return (0,) * days if text is None else tuple(json.loads(text))


def _month_slice(text: str | None, first: int, last: int, days: int) -> str:
    """Days first..last-1 of a month's JSON array (None: a month without jobs), without brackets."""
    if text is None:
        return ",".join(["0"] * (last - first))
    inner = text[1:-1]
    return inner if first == 0 and last == days else ",".join(inner.split(",")[first:last])


@functools.cache
def _months_statement(*, filtered: bool) -> Select[Any]:
    """The org's month rows from the month of `first_month` to `end` (of environment_id when
    `filtered`), built once: building and keying a statement costs as much as running this one."""
    model = DeploymentMonthRollupRow
    query = select(model.environment_id, model.month, model.jobs, model.failures).where(
        model.org_id == bindparam("org_id"),
        model.month >= bindparam("first_month"),
        model.month <= bindparam("end"),
    )
    return query.where(model.environment_id == bindparam("environment_id")) if filtered else query


def _cells(
    session: Session,
    org_id: str,
    group_by: str,
    start: date,
    end: date,
    environment_id: str | None,
) -> list[tuple[str, str, int, int]]:
    """The grid's `(row, column, jobs, failures)` cells where jobs exist, counted by the database."""
    since, until = _bounds(start, end)
    values = {"org_id": org_id, "start": start, "end": end, "since": since, "until": until}
    if environment_id is not None:
        values["environment_id"] = environment_id
    statement = _cells_statement(dialect_name(session), group_by, filtered=environment_id is not None)
    return json.loads(session.scalar(statement, values) or "[]")


def _lay_out(cells: list[tuple[str, str, int, int]], rows: list[str], columns: list[str]) -> tuple[str, str]:
    """Cells as the two JSON grids, rows by columns, zero where there are none."""
    row_index = {row: i for i, row in enumerate(rows)}
    column_index = {column: j for j, column in enumerate(columns)}
    counts = [[0] * len(columns) for _ in rows]
    failures = [[0] * len(columns) for _ in rows]
    for row, column, jobs, failed in cells:
        i, j = row_index[row], column_index[column]
        counts[i][j], failures[i][j] = jobs, failed
    return _compact(counts), _compact(failures)


def _values(metric: str, counts: str, failures: str) -> str:
    """The grid of the metric asked for; a failure rate without jobs is null."""
    if metric == "count":
        return counts
    if metric == "failures":
        return failures
    rates = [
        [round(failed / jobs, 4) if jobs else None for jobs, failed in zip(job_row, failed_row, strict=True)]
        for job_row, failed_row in zip(json.loads(counts), json.loads(failures), strict=True)
    ]
    return _compact(rates)


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _axis(names: Sequence[str]) -> list[dict[str, str]]:
    """Axis items (HeatmapAxisItem) whose id is also what a person reads."""
    return [{"id": name, "name": name} for name in names]


@functools.lru_cache(maxsize=256)
def _time_axis(start: date, end: date, bucket: str) -> tuple[HeatmapAxisItem, ...]:
    """The columns of a range, made once: the same few ranges (ending today) are asked for again
    and again, and a year of days costs a tenth of the answer to make."""
    return tuple(
        HeatmapAxisItem(id=day, name=day) for day in map(date.isoformat, _bucket_starts(start, end, bucket))
    )


def _environments(session: Session, *, org_id: str, environment_id: str | None) -> list[dict[str, str]]:
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


@functools.cache
def _cells_statement(dialect: str, group_by: str, *, filtered: bool) -> Select[Any]:
    """The cells query of one shape (agent or weekday_hour), over the parameters org_id, start and
    end (days), since and until (instants), and environment_id when `filtered`.

    Built once per shape: building and keying a statement costs a third of running it on a rollup.
    """
    environment_id = bindparam("environment_id") if filtered else None
    grouped = _by_agent(environment_id) if group_by == "agent" else _by_weekday_hour(dialect, environment_id)
    return _cells_json(dialect, grouped.subquery())


def _by_weekday_hour(dialect: str, environment_id: BindParameter[str] | None) -> Select[Any]:
    """(weekday, hour) → jobs, failures, from the hourly rollup: summed per hour first, so that the
    weekday is worked out once per hour rather than once per environment and hour."""
    rollup = DeploymentHourlyRollupRow
    per_hour = select(
        rollup.day,
        rollup.hour,
        func.sum(rollup.jobs).label("jobs"),
        func.sum(rollup.failures).label("failures"),
    ).where(
        rollup.org_id == bindparam("org_id"), rollup.day >= bindparam("start"), rollup.day <= bindparam("end")
    )
    if environment_id is not None:
        per_hour = per_hour.where(rollup.environment_id == environment_id)
    hours = per_hour.group_by(rollup.day, rollup.hour).subquery()
    dated = select(
        _weekday(dialect, hours.c.day).label("weekday"), hours.c.hour, hours.c.jobs, hours.c.failures
    ).subquery()
    # Labels are worked out from the grouped columns: `Mon`..`Sun` and `00`..`23`.
    names = "".join(WEEKDAYS)
    hour_text = cast(dated.c.hour, Text)
    return select(
        func.substr(names, dated.c.weekday * 3 + 1, 3).label("row"),
        case((dated.c.hour < 10, "0" + hour_text), else_=hour_text).label("column"),
        func.sum(dated.c.jobs).label("jobs"),
        func.sum(dated.c.failures).label("failures"),
    ).group_by(dated.c.weekday, dated.c.hour)


def _by_agent(environment_id: BindParameter[str] | None) -> Select[Any]:
    """(agent, environment) → results, failed results: each agent's part in the jobs that ended."""
    job, result = DeploymentJobRow, DeploymentJobAgentRow
    query = (
        select(
            result.stable_key.label("row"),
            job.environment_id.label("column"),
            func.count().label("jobs"),
            func.sum(case((result.status == "error", 1), else_=0)).label("failures"),
        )
        .join(job, job.id == result.job_id)
        .where(
            job.org_id == bindparam("org_id"),
            job.created_at >= bindparam("since"),
            job.created_at < bindparam("until"),
            job.status.in_(ENDED),
        )
        .group_by(result.stable_key, job.environment_id)
    )
    if environment_id is not None:
        query = query.where(job.environment_id == environment_id)
    return query


def _cells_json(dialect: str, grouped: Subquery) -> Select[Any]:
    """One JSON array of `[row, column, jobs, failures]` cells, built by the database."""
    fields = (grouped.c.row, grouped.c.column, grouped.c.jobs, grouped.c.failures)
    if dialect == "postgresql":
        return select(cast(func.json_agg(func.json_build_array(*fields)), Text))
    # Joined as text: json_group_array would check each array again, a fifth of the cost.
    joined = func.group_concat(func.json_array(*fields), type_=Text)
    return select(literal_column("'['", Text) + joined + literal_column("']'", Text))


def _agent_rows(
    session: Session, org_id: str, cells: list[tuple[str, str, int, int]]
) -> list[dict[str, str]]:
    """The agents the cells name (at most one per agent and environment), by stableKey."""
    keys = {cell[0] for cell in cells}
    query = select(AgentRow.stable_key, AgentRow.name).where(
        AgentRow.org_id == org_id, AgentRow.stable_key.in_(keys)
    )
    return [{"id": key, "name": name} for key, name in session.execute(query.order_by(AgentRow.stable_key))]


# --- Metrics -----------------------------------------------------------------------------------


def metrics(
    session: Session,
    *,
    org_id: str,
    period: str,
    start: date | None,
    end: date | None,
    environment_id: str | None,
) -> DeploymentMetrics:
    """Deployments, failures, change failure rate, median duration and time to restore: over the
    range, per period, and the same per environment."""
    start, end = analytics_range(start, end)
    environments = _environments(session, org_id=org_id, environment_id=environment_id)
    ended: dict[tuple[str | None, date | None], tuple[int, int, float | None]] = {}
    restored: dict[tuple[str | None, date | None], float | None] = {}
    query = _metrics_query(session, org_id, start, end, environment_id, period)
    for kind, environment, first, count, failures, median in session.execute(query):
        if kind == DURATION:
            ended[environment, first] = (count, failures, median)
        else:
            restored[environment, first] = median

    # Frequencies count the days since the first deployment, not the days of the range before it.
    began = _first_days(session, org_id, environment_id)
    counted_from = {key: max(start, day) for key, day in began.items()}
    counted_from[None] = max(start, min(began.values())) if began else start

    def figures(environment: str | None, first: date | None) -> dict[str, Any]:
        since = counted_from.get(environment, start)
        days = (end - since).days + 1 if first is None else _days_within(first, period, since, end)
        count, failures, median = ended.get((environment, first), (0, 0, None))
        return {
            "deployments": count,
            "failures": failures,
            "deployments_per_day": round(count / days, 4) if days > 0 else None,
            "change_failure_rate": round(failures / count, 4) if count else None,
            "median_duration_seconds": _seconds(median),
            "median_time_to_restore_seconds": _seconds(restored.get((environment, first))),
        }

    firsts = _bucket_starts(start, end, period)
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


def _seconds(value: float | None) -> float | None:
    # Timestamps differ by whole microseconds; what is below comes from the arithmetic.
    return None if value is None else round(float(value), 3)


def _metrics_query(
    session: Session, org_id: str, start: date, end: date, environment_id: str | None, period: str
) -> Select[Any]:
    """Rows (kind, environment, period start, count, failures, median seconds) for kind DURATION
    (every ended job) and RESTORE (every failed job that a complete one followed), at four levels:
    environment and period, environment (period NULL), period (environment NULL), all (both NULL).
    """
    job, dialect = DeploymentJobRow, dialect_name(session)
    since, until = _bounds(start, end)
    # The next complete job may have been created after the range: only the start bounds the scan.
    scope = [job.org_id == org_id, job.created_at >= since, job.status.in_(ENDED)]
    if environment_id is not None:
        scope.append(job.environment_id == environment_id)
    # Sorted byte by byte on PostgreSQL: ids need no collation, which would cost half of each sort.
    environment, job_id = _bytewise(dialect, job.environment_id), _bytewise(dialect, job.id)
    later = {"partition_by": environment, "order_by": (job.finished_at.desc(), job_id.desc())}
    ended = (
        select(
            environment.label("environment_id"),
            job.status,
            job.created_at,
            func.coalesce(job.started_at, job.created_at).label("started_at"),
            job.finished_at,
            # The first finish of a complete job among the jobs that finished after this one.
            func.min(case((job.status == "complete", job.finished_at)))
            .over(**later, rows=(None, -1))
            .label("restored_at"),
        )
        .where(*scope)
        .cte("ended")
    )
    first = _period_start(dialect, _utc_day(dialect, ended.c.created_at), period).label("first")
    in_range = ended.c.created_at < until
    durations = select(
        literal_column(str(DURATION)).label("kind"),
        ended.c.environment_id,
        first,
        _seconds_between(dialect, ended.c.started_at, ended.c.finished_at).label("seconds"),
        _failed(ended.c.status).label("failed"),
    ).where(in_range)
    restores = select(
        literal_column(str(RESTORE)),
        ended.c.environment_id,
        first,
        _seconds_between(dialect, ended.c.finished_at, ended.c.restored_at),
        literal_column("0"),
    ).where(in_range, ended.c.status.in_(FAILED_JOB_STATUSES), ended.c.restored_at.is_not(None))
    samples = union_all(durations, restores).cte("samples")
    s = samples.c
    levels = union_all(
        select(s.kind, s.environment_id, s.first, s.seconds, s.failed),
        select(s.kind, s.environment_id, null(), s.seconds, s.failed),
        select(s.kind, null(), s.first, s.seconds, s.failed),
        select(s.kind, null(), null(), s.seconds, s.failed),
    ).subquery("levels")
    group = (levels.c.kind, levels.c.environment_id, levels.c.first)
    # One sort serves every window: the same partition and order, the whole partition as frame
    # for the totals. Only the middle rows leave it, so the grouping after it is small.
    ordered = {"partition_by": group, "order_by": levels.c.seconds}
    whole = {**ordered, "rows": (None, None)}
    ranked = select(
        *levels.c,
        func.row_number().over(**ordered).label("position"),
        func.count().over(**whole).label("size"),
        func.sum(levels.c.failed).over(**whole).label("failures"),
    ).subquery("ranked")
    r = ranked.c
    # The middle value, or the mean of the two middle values.
    middle = r.position.between((r.size + 1) // 2, (r.size + 2) // 2)
    return (
        select(r.kind, r.environment_id, r.first, func.max(r.size), func.max(r.failures), func.avg(r.seconds))
        .where(middle)
        .group_by(r.kind, r.environment_id, r.first)
    )


# --- SQL that differs between SQLite and PostgreSQL ---------------------------------------------
# Constants are inlined, not bound: PostgreSQL matches a GROUP BY expression to the SELECT's by its
# text, and two bound parameters never match.


def _bytewise(dialect: str, column: ColumnElement[str]) -> ColumnElement[str]:
    return column.collate("C") if dialect == "postgresql" else column  # SQLite compares bytes already


def _failed(status: ColumnElement[str]) -> ColumnElement[int]:
    return case((status.in_(FAILED_JOB_STATUSES), 1), else_=0)


def _utc_day(dialect: str, timestamp: ColumnElement[datetime]) -> ColumnElement[date]:
    if dialect == "postgresql":
        return cast(func.timezone(literal_column("'UTC'"), timestamp), Date)
    # SQLite keeps UTC timestamps as ISO 8601 text.
    return func.date(timestamp, type_=Date)


def _utc_hour(dialect: str, timestamp: ColumnElement[datetime]) -> ColumnElement[int]:
    if dialect == "postgresql":
        return cast(extract("hour", func.timezone(literal_column("'UTC'"), timestamp)), Integer)
    return cast(func.strftime(literal_column("'%H'"), timestamp), Integer)


def _period_start(dialect: str, day: ColumnElement[date], period: str) -> ColumnElement[date]:
    """The day itself, the Monday of its week, or the first of its month."""
    if period == "day":
        return day
    if dialect == "postgresql":
        return cast(func.date_trunc(literal_column(f"'{period}'"), cast(day, DateTime)), Date)
    modifiers = ("'weekday 0'", "'-6 days'") if period == "week" else ("'start of month'",)
    return func.date(day, *map(literal_column, modifiers), type_=Date)


def _weekday(dialect: str, day: ColumnElement[date]) -> ColumnElement[int]:
    """0 for Monday to 6 for Sunday."""
    if dialect == "postgresql":
        return cast(extract("isodow", day), Integer) - 1
    return (cast(func.strftime(literal_column("'%w'"), day), Integer) + 6) % 7


def _seconds_between(
    dialect: str, since: ColumnElement[datetime], until: ColumnElement[datetime]
) -> ColumnElement[float]:
    if dialect == "postgresql":
        return cast(extract("epoch", until - since), Float)
    return (func.julianday(until) - func.julianday(since)) * 86400.0

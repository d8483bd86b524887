"""Deployment heatmaps: ended jobs by environment and day or week (from the month rollup), by
weekday and hour (from the hourly rollup), and by agent and environment (from the jobs' agent
results), counted by the database (service.deployments.rollups keeps the rollups)."""

from __future__ import annotations

import calendar
import functools
import itertools
import json
from collections.abc import Sequence
from datetime import date
from typing import Any

from sqlalchemy import (
    BindParameter,
    Select,
    Subquery,
    Text,
    bindparam,
    case,
    cast,
    func,
    literal_column,
    select,
)
from sqlalchemy.orm import Session

from api.deployments import (
    Heatmap,
    HeatmapAxisItem,
)
from service.agents.models import AgentRow
from service.deployments.analytics_cache import kept_answer
from service.deployments.dialects import weekday
from service.deployments.models import (
    DeploymentAgentRollupRow,
    DeploymentHourlyRollupRow,
    DeploymentMonthRollupRow,
)
from service.deployments.ranges import (
    analysed_environments,
    analytics_range,
    days_outside,
    period_starts,
    stretch_rows,
    whole_months,
)
from service.http.responses import splice_json
from service.storage.db import dialect_name

WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


HOURS = tuple(f"{hour:02d}" for hour in range(24))


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
    """The heatmap as JSON text (a `Heatmap`), kept between requests until the rollups change
    (service.deployments.analytics_cache).

    A year of days by twenty environments is 7,300 numbers of each kind: they go from the month
    rows to the answer as text, never as Python numbers. The other grids are a few thousand cells
    at most, counted by the database and laid out here.
    """
    start, end = analytics_range(start, end)
    environments = analysed_environments(session, org_id=org_id, environment_id=environment_id)
    agents = _agent_names(session, org_id) if group_by == "agent" else []
    shown = (tuple((environment["id"], environment["name"]) for environment in environments), tuple(agents))
    request = ("heatmap", group_by, bucket, metric, start, end, environment_id, shown)

    def make() -> str:
        return _heatmap(
            session, org_id, group_by, bucket, metric, start, end, environment_id, environments, agents
        )

    return kept_answer(session, org_id, request, make)


def _heatmap(
    session: Session,
    org_id: str,
    group_by: str,
    bucket: str,
    metric: str,
    start: date,
    end: date,
    environment_id: str | None,
    environments: list[dict[str, str]],
    agents: list[tuple[str, str]],
) -> str:
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
            rows, columns = _agent_rows(agents, cells), environments
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
    return splice_json(frame, counts=counts, failures=failures, values=_values(metric, counts, failures))


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
    for month in period_starts(start, end, "month"):
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
    values = {"org_id": org_id, "start": start, "end": end} | _agent_spans(start, end)
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
        HeatmapAxisItem(id=day, name=day) for day in map(date.isoformat, period_starts(start, end, bucket))
    )


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
        weekday(dialect, hours.c.day).label("weekday"), hours.c.hour, hours.c.jobs, hours.c.failures
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
    """(agent, environment) → results, failed results, from the agent rollup: the months the range
    covers whole from their own rows, the days around them from theirs (`_agent_spans`)."""
    rollup = DeploymentAgentRollupRow
    stretches = [
        ("day", bindparam("days1_first"), bindparam("days1_last")),
        ("day", bindparam("days2_first"), bindparam("days2_last")),
        ("month", bindparam("months_first"), bindparam("months_last")),
    ]
    columns = [rollup.stable_key, rollup.environment_id, rollup.results, rollup.failures]
    rows = stretch_rows(rollup, columns, bindparam("org_id"), stretches, environment_id).subquery()
    return select(
        rows.c.stable_key.label("row"),
        rows.c.environment_id.label("column"),
        func.sum(rows.c.results).label("jobs"),
        func.sum(rows.c.failures).label("failures"),
    ).group_by(rows.c.stable_key, rows.c.environment_id)


def _agent_spans(start: date, end: date) -> dict[str, date]:
    """The parameters of `_by_agent`: at most two stretches of days and one of whole months, an
    empty stretch where there is none."""
    months = whole_months(start, end)
    days = days_outside(start, end, months)
    empty = (date.max, date.min)
    values = {
        "months_first": months[0] if months else date.max,
        "months_last": months[-1] if months else date.min,
    }
    for n, (first, last) in enumerate([*days, empty, empty][:2], start=1):
        values[f"days{n}_first"], values[f"days{n}_last"] = first, last
    return values


def _cells_json(dialect: str, grouped: Subquery) -> Select[Any]:
    """One JSON array of `[row, column, jobs, failures]` cells, built by the database."""
    fields = (grouped.c.row, grouped.c.column, grouped.c.jobs, grouped.c.failures)
    if dialect == "postgresql":
        return select(cast(func.json_agg(func.json_build_array(*fields)), Text))
    # Joined as text: json_group_array would check each array again, a fifth of the cost.
    joined = func.group_concat(func.json_array(*fields), type_=Text)
    return select(literal_column("'['", Text) + joined + literal_column("']'", Text))


def _agent_names(session: Session, org_id: str) -> list[tuple[str, str]]:
    """The org's agents' (stableKey, name), by stableKey."""
    query = select(AgentRow.stable_key, AgentRow.name).where(AgentRow.org_id == org_id)
    return [(key, name) for key, name in session.execute(query.order_by(AgentRow.stable_key))]


def _agent_rows(
    agents: list[tuple[str, str]], cells: list[tuple[str, str, int, int]]
) -> list[dict[str, str]]:
    """The agents the cells name (at most one per agent and environment), by stableKey."""
    keys = {cell[0] for cell in cells}
    return [{"id": key, "name": name} for key, name in agents if key in keys]

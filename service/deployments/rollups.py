"""The rollups deployment analytics read, kept in the transaction that ends each job.

A job is counted once it has ended, on the UTC day and hour it was created:
- by month, a JSON array with a number per day of jobs and of failures (the day and week heatmaps);
- hourly (the weekday-by-hour heatmap);
- per day and per month, the delivery metrics: ended, successful and failed jobs, and histograms
  of job durations and of times to restore (service.deployments.metrics);
- each agent version's first complete deployment in each environment, with its lead time
  (service.deployments.leadtime): one row per version and environment, whatever the jobs.

An incident opens with the first failed job of a run in an environment and closes with the next
complete job there, whenever either was created: its time to restore counts on the day the first
failure was created. Loads that write jobs without the worker call `rebuild_rollups`. Both move
the org's rollup version, under which analytics answers are kept (service.deployments.analytics_cache).
"""

from __future__ import annotations

import calendar
import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

from sqlalchemy import (
    Integer,
    Text,
    and_,
    case,
    cast,
    delete,
    func,
    insert,
    literal_column,
    select,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from api.deployments import (
    FAILED_JOB_STATUSES,
    FINISHED_JOB_STATUSES,
)
from service.agents.models import AgentVersionRow
from service.deployments.analytics_cache import rollups_changed
from service.deployments.dialects import failed_flag, month_start, utc_day, utc_hour
from service.deployments.histograms import Histogram, bucket_of, dump
from service.deployments.models import (
    DeploymentAgentRollupRow,
    DeploymentArrivalRow,
    DeploymentHourlyRollupRow,
    DeploymentIncidentRow,
    DeploymentJobAgentRow,
    DeploymentJobRow,
    DeploymentMetricRollupRow,
    DeploymentMonthRollupRow,
    DeploymentRollupVersionRow,
)
from service.storage.db import dialect_name, upsert

ENDED = sorted(FINISHED_JOB_STATUSES)


@dataclass(frozen=True)
class Ended:
    """What the metrics count of an ended job."""

    environment_id: str
    status: str
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None  # unknown only for jobs that ended before jobs kept their end

    @property
    def succeeded(self) -> bool:
        return self.status == "complete"

    @property
    def failed(self) -> bool:
        return self.status in FAILED_JOB_STATUSES

    @property
    def day(self) -> date:
        return self.created_at.astimezone(UTC).date()

    @property
    def ended_at(self) -> datetime:
        return self.finished_at or self.created_at

    @property
    def duration_bucket(self) -> int | None:
        if self.finished_at is None:
            return None
        # From datetimes, not database arithmetic: durations keep their microseconds everywhere.
        return bucket_of((self.finished_at - (self.started_at or self.created_at)).total_seconds())


@dataclass
class MetricsCount:
    """One environment's metrics over a day or month, as a rollup row holds them."""

    jobs: int = 0
    successes: int = 0
    failures: int = 0
    durations: Histogram = field(default_factory=Counter)
    restores: Histogram = field(default_factory=Counter)


def count_metrics(
    jobs: Iterable[Ended],
) -> tuple[dict[tuple[str, str, date], MetricsCount], dict[str, tuple[datetime, date]]]:
    """The metrics rows of ended jobs given by environment and then by finish, keyed by
    (environment, span, start), and each environment's incident still open (first failure's end
    and creation day): what the worker would have kept had it ended these jobs one by one."""
    rows: dict[tuple[str, str, date], MetricsCount] = defaultdict(MetricsCount)
    open_incidents: dict[str, tuple[datetime, date]] = {}

    def spans(environment_id: str, day: date) -> list[MetricsCount]:
        return [rows[environment_id, "day", day], rows[environment_id, "month", day.replace(day=1)]]

    for job in jobs:
        day, bucket, succeeded, failed = job.day, job.duration_bucket, job.succeeded, job.failed
        for counted in spans(job.environment_id, day):
            counted.jobs += 1
            counted.successes += succeeded
            counted.failures += failed
            if bucket is not None:
                counted.durations[bucket] += 1
        if failed:
            open_incidents.setdefault(job.environment_id, (job.ended_at, day))
        elif succeeded and job.environment_id in open_incidents:
            failed_at, day = open_incidents.pop(job.environment_id)
            restore = bucket_of((job.ended_at - failed_at).total_seconds())
            for counted in spans(job.environment_id, day):
                counted.restores[restore] += 1
    return rows, open_incidents


def record_job_end(session: Session, job: DeploymentJobRow) -> None:
    """Count a job that has just ended in the rollups of the UTC day and hour it was created."""
    created = job.created_at.astimezone(UTC)
    day = created.date()
    keys: dict[str, Any] = {"org_id": job.org_id, "environment_id": job.environment_id, "day": day}
    counts = {"jobs": 1, "failures": int(job.status in FAILED_JOB_STATUSES)}
    _increment(session, DeploymentHourlyRollupRow, keys | {"hour": created.hour}, counts)
    _increment_day_of_month(session, job.org_id, job.environment_id, day, counts)
    _record_metrics(session, job, day)
    _record_arrivals(session, job)
    for result in job.agent_rows:
        if result.status == "pending":  # never sent: a wave the rollout did not reach
            continue
        failed = {"results": 1, "failures": int(result.status == "error")}
        for span, start in (("day", day), ("month", day.replace(day=1))):
            keys = {"org_id": job.org_id, "span": span, "start": start, "environment_id": job.environment_id}
            _increment(session, DeploymentAgentRollupRow, keys | {"stable_key": result.stable_key}, failed)
    # Last: concurrent job ends of one org take turns on this row until they commit.
    rollups_changed(session, job.org_id)


def _record_metrics(session: Session, job: DeploymentJobRow, day: date) -> None:
    """Count the job in its day's and month's metrics, and open or close its environment's incident
    (as `count_metrics` does for many jobs at once)."""
    ended = Ended(job.environment_id, job.status, job.created_at, job.started_at, job.finished_at)
    counts = {"jobs": 1, "successes": int(ended.succeeded), "failures": int(ended.failed)}
    assert ended.duration_bucket is not None
    _add_to_metrics(session, job.org_id, job.environment_id, day, counts, "durations", ended.duration_bucket)
    if ended.failed:
        # The first failure of a run opens the incident; later ones leave its start alone.
        opening = upsert(session, DeploymentIncidentRow).values(
            environment_id=job.environment_id, org_id=job.org_id, failed_at=job.finished_at, day=day
        )
        session.execute(opening.on_conflict_do_nothing(index_elements=["environment_id"]))
    elif ended.succeeded:
        incident = DeploymentIncidentRow
        closed = session.execute(
            delete(incident)
            .where(incident.environment_id == job.environment_id, incident.failed_at <= job.finished_at)
            .returning(incident.failed_at, incident.day)
        ).first()
        if closed is not None:
            restore = bucket_of((job.finished_at - closed.failed_at).total_seconds())
            _add_to_metrics(session, job.org_id, job.environment_id, closed.day, {}, "restores", restore)


def _record_arrivals(session: Session, job: DeploymentJobRow) -> None:
    """Keep the job's end as the arrival in its environment of each version it deployed complete,
    unless that version arrived there earlier."""
    complete = {(result.agent_id, result.version) for result in job.agent_rows if result.status == "complete"}
    if not complete:
        return
    assert job.finished_at is not None
    version = AgentVersionRow
    query = select(version.agent_id, version.number, version.created_at).where(
        version.agent_id.in_({agent_id for agent_id, _ in complete}),
        version.number.in_({number for _, number in complete}),
    )
    model = DeploymentArrivalRow
    for agent_id, number, created_at in session.execute(query):
        if (agent_id, number) not in complete:
            continue
        statement = upsert(session, model).values(
            org_id=job.org_id,
            environment_id=job.environment_id,
            agent_id=agent_id,
            version=number,
            reached_at=job.finished_at,
            lead_seconds=(job.finished_at - created_at).total_seconds(),
        )
        # Concurrent workers may commit their ends out of order: the earliest end stays.
        kept = {"reached_at": statement.excluded.reached_at, "lead_seconds": statement.excluded.lead_seconds}
        session.execute(
            statement.on_conflict_do_update(
                index_elements=["org_id", "environment_id", "agent_id", "version"],
                set_=kept,
                where=model.reached_at > statement.excluded.reached_at,
            )
        )


def _add_to_metrics(
    session: Session,
    org_id: str,
    environment_id: str,
    day: date,
    counts: dict[str, int],
    histogram: str,
    bucket: int,
) -> None:
    """Add `counts` and one sample in `bucket` of the `histogram` column to the day's and the
    month's metrics rows: one statement each, safe under concurrent workers."""
    model, dialect = DeploymentMetricRollupRow, dialect_name(session)
    first = {"jobs": 0, "successes": 0, "failures": 0, **counts, "durations": "{}", "restores": "{}"}
    first[histogram] = f'{{"{bucket}":1}}'
    added: dict[str, Any] = {name: getattr(model, name) + count for name, count in counts.items()}
    added[histogram] = _add_to_bucket(dialect, getattr(model, histogram), bucket)
    for span, start in (("day", day), ("month", day.replace(day=1))):
        keys = {"org_id": org_id, "environment_id": environment_id, "span": span, "start": start}
        statement = upsert(session, model).values(**keys, **first)
        session.execute(statement.on_conflict_do_update(index_elements=list(keys), set_=added))


def _add_to_bucket(dialect: str, histogram: ColumnElement[str], bucket: int) -> ColumnElement[str]:
    """The JSON object `histogram` with one added to its count at key `bucket`."""
    if dialect == "postgresql":
        counts = cast(histogram, JSONB)
        count = func.coalesce(cast(counts[str(bucket)].astext, Integer), 0) + 1
        path = cast(literal_column(f"'{{{bucket}}}'"), ARRAY(Text))
        return cast(func.jsonb_set(counts, path, func.to_jsonb(count)), Text)
    path = literal_column(f"'$.\"{bucket}\"'")
    return func.json_set(histogram, path, func.coalesce(func.json_extract(histogram, path), 0) + 1)


def _increment(session: Session, model: type[Any], keys: dict[str, Any], counts: dict[str, int]) -> None:
    """Add `counts` to the row at `keys`: one statement, safe under concurrent workers."""
    statement = upsert(session, model).values(**keys, **counts)
    added = {name: getattr(model, name) + getattr(statement.excluded, name) for name in counts}
    session.execute(statement.on_conflict_do_update(index_elements=list(keys), set_=added))


def _increment_day_of_month(
    session: Session, org_id: str, environment_id: str, day: date, counts: dict[str, int]
) -> None:
    """Add `counts` to the day's place in its month row: one statement, like `_increment`."""
    month, index = day.replace(day=1), day.day - 1
    model, dialect = DeploymentMonthRollupRow, dialect_name(session)
    first = {name: _month_text(month, {index: count}) for name, count in counts.items()}
    statement = upsert(session, model).values(
        org_id=org_id, environment_id=environment_id, month=month, **first
    )
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
        tables = ", ".join(
            model.__tablename__
            for model in (
                hourly,
                monthly,
                DeploymentMetricRollupRow,
                DeploymentIncidentRow,
                DeploymentAgentRollupRow,
                DeploymentRollupVersionRow,
                DeploymentArrivalRow,
            )
        )
        session.execute(text(f"LOCK TABLE {tables} IN SHARE ROW EXCLUSIVE MODE"))
    rollups_changed(session, org_id)
    session.execute(delete(hourly).where(hourly.org_id == org_id))
    session.execute(delete(monthly).where(monthly.org_id == org_id))
    job = DeploymentJobRow
    day, hour = utc_day(dialect, job.created_at), utc_hour(dialect, job.created_at)
    per_hour = (
        select(job.org_id, job.environment_id, day, hour, func.count(), func.sum(failed_flag(job.status)))
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
    _rebuild_metrics(session, org_id)
    count_agent_results(session, org_id, dialect)
    count_arrivals(session, org_id)


def count_arrivals(executor: Session | Connection, org_id: str) -> None:
    """Recount the org's arrivals from its jobs' agent results: each version's first complete
    deployment in each environment (one row per version and environment, however many jobs)."""
    arrival, agent, job, version = (
        DeploymentArrivalRow,
        DeploymentJobAgentRow,
        DeploymentJobRow,
        AgentVersionRow,
    )
    executor.execute(delete(arrival).where(arrival.org_id == org_id))
    first = (
        select(
            agent.agent_id, agent.version, job.environment_id, func.min(job.finished_at).label("reached_at")
        )
        .join(job, job.id == agent.job_id)
        .where(job.org_id == org_id, agent.status == "complete", job.finished_at.is_not(None))
        .group_by(agent.agent_id, agent.version, job.environment_id)
        .subquery()
    )
    query = select(first, version.created_at).join(
        version, and_(version.agent_id == first.c.agent_id, version.number == first.c.version)
    )
    # Seconds from datetimes, not database arithmetic: lead times keep their microseconds everywhere.
    rows = [
        {"org_id": org_id, "environment_id": environment_id, "agent_id": agent_id, "version": number}
        | {"reached_at": reached_at, "lead_seconds": (reached_at - created_at).total_seconds()}
        for agent_id, number, environment_id, reached_at, created_at in executor.execute(query)
    ]
    if rows:
        executor.execute(insert(arrival), rows)


def count_agent_results(executor: Session | Connection, org_id: str, dialect: str) -> None:
    """Recount the org's agent rollups from its ended jobs' agent results: the days, then the
    months from the days."""
    rollup, job, result = DeploymentAgentRollupRow, DeploymentJobRow, DeploymentJobAgentRow
    executor.execute(delete(rollup).where(rollup.org_id == org_id))
    day = utc_day(dialect, job.created_at)
    per_day = (
        select(
            job.org_id,
            literal_column("'day'"),
            day,
            job.environment_id,
            result.stable_key,
            func.count(),
            func.sum(case((result.status == "error", 1), else_=0)),
        )
        .join(job, job.id == result.job_id)
        .where(job.org_id == org_id, job.status.in_(ENDED))
        .group_by(job.org_id, day, job.environment_id, result.stable_key)
    )
    columns = ["org_id", "span", "start", "environment_id", "stable_key", "results", "failures"]
    executor.execute(insert(rollup).from_select(columns, per_day))
    month = month_start(dialect, rollup.start)
    per_month = (
        select(
            rollup.org_id,
            literal_column("'month'"),
            month,
            rollup.environment_id,
            rollup.stable_key,
            func.sum(rollup.results),
            func.sum(rollup.failures),
        )
        .where(rollup.org_id == org_id, rollup.span == "day")
        .group_by(rollup.org_id, month, rollup.environment_id, rollup.stable_key)
    )
    executor.execute(insert(rollup).from_select(columns, per_month))


def _rebuild_metrics(session: Session, org_id: str) -> None:
    metric, incident, job = DeploymentMetricRollupRow, DeploymentIncidentRow, DeploymentJobRow
    session.execute(delete(metric).where(metric.org_id == org_id))
    session.execute(delete(incident).where(incident.org_id == org_id))
    ended = (
        select(job.environment_id, job.status, job.created_at, job.started_at, job.finished_at)
        .where(job.org_id == org_id, job.status.in_(ENDED))
        .order_by(job.environment_id, job.finished_at, job.id)
    )
    rows, open_incidents = count_metrics(Ended(*row) for row in session.execute(ended))
    if rows:
        session.execute(insert(metric), metric_rows(org_id, rows))
    if open_incidents:
        session.execute(
            insert(incident),
            [
                {"environment_id": environment_id, "org_id": org_id, "failed_at": failed_at, "day": day}
                for environment_id, (failed_at, day) in open_incidents.items()
            ],
        )


def metric_rows(org_id: str, counted: dict[tuple[str, str, date], MetricsCount]) -> list[dict[str, Any]]:
    """Counted metrics as rows of DeploymentMetricRollupRow."""
    return [
        {"org_id": org_id, "environment_id": environment_id, "span": span, "start": start}
        | {"jobs": count.jobs, "successes": count.successes, "failures": count.failures}
        | {"durations": dump(count.durations), "restores": dump(count.restores)}
        for (environment_id, span, start), count in counted.items()
    ]

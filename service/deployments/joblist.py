"""The jobs list read: a page of jobs with their agents' results, each job's JSON made by the database."""

from __future__ import annotations

import functools
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Integer, Select, bindparam, cast, func, literal_column, select
from sqlalchemy.dialects.postgresql import JSONB, aggregate_order_by
from sqlalchemy.orm import Session

from api.common import Page
from api.deployments import AgentResult, DeploymentJob
from service.deployments.models import DeploymentJobAgentRow, DeploymentJobRow
from service.errors import InvalidCursor, InvalidInput
from service.http.responses import splice_json
from service.storage.db import dialect_name
from service.storage.ids import is_id
from service.storage.jsonsql import json_text, model_json_of, stored_json, wire_timestamp


def list_jobs(
    session: Session,
    *,
    org_id: str,
    environment_id: str | None,
    statuses: list[str],
    start: date | None,
    end: date | None,
    limit: int,
    cursor: str | None,
) -> str:
    """Jobs newest first (ids are time-ordered) with each agent's result, as JSON text (a
    `Page[DeploymentJob]` with the cursor of the next page if there is one); `start` and `end` are
    inclusive UTC days of creation. A row per job, its JSON made by the database: turning the rows
    into records, models and JSON in Python cost two thirds of the read."""
    if start is not None and end is not None and end < start:
        raise InvalidInput(f"end ({end}) is before start ({start})", field="end")
    if cursor is not None and not is_id(cursor, "job"):
        raise InvalidCursor
    statement = _jobs_statement(
        dialect_name(session),
        by_environment=environment_id is not None,
        by_status=bool(statuses),
        since=start is not None,
        until=end is not None,
        after=cursor is not None,
    )
    values: dict[str, Any] = {"org_id": org_id, "environment_id": environment_id, "statuses": statuses}
    if start is not None:
        values["since"] = datetime.combine(start, time.min, tzinfo=UTC)
    if end is not None:
        values["until"] = datetime.combine(end + timedelta(days=1), time.min, tzinfo=UTC)
    rows = session.execute(statement, values | {"cursor": cursor, "limit": limit + 1}).all()
    next_cursor = rows[limit - 1].id if len(rows) > limit else None
    frame = Page[DeploymentJob](items=[], limit=limit, next_cursor=next_cursor)
    return splice_json(frame, items=f"[{','.join(row.job for row in rows[:limit])}]")


@functools.cache
def _jobs_statement(
    dialect: str, *, by_environment: bool, by_status: bool, since: bool, until: bool, after: bool
) -> Select[Any]:
    """A page of jobs (id, JSON), over the parameters org_id, environment_id, statuses, since,
    until, cursor and limit. Built once per shape: building and keying it would cost as much as
    running it."""
    job = DeploymentJobRow
    query = select(job.id, _job_json(dialect).label("job")).where(job.org_id == bindparam("org_id"))
    if by_environment:
        query = query.where(job.environment_id == bindparam("environment_id"))
    if by_status:
        query = query.where(job.status.in_(bindparam("statuses", expanding=True)))
    # A range of creation is read from the (org, [environment,] created_at, id) indexes.
    if since:
        query = query.where(job.created_at >= bindparam("since"))
    if until:
        query = query.where(job.created_at < bindparam("until"))
    if after:
        query = query.where(job.id < bindparam("cursor"))
    return query.order_by(job.id.desc()).limit(bindparam("limit", type_=Integer))


def _job_json(dialect: str) -> ColumnElement[str]:
    """A job's DeploymentJob JSON, its agents by stable key, naming the change request that started it."""
    job, result = DeploymentJobRow, DeploymentJobAgentRow
    if dialect == "postgresql":
        agent = model_json_of(dialect, AgentResult, result)
        in_order = func.json_agg(aggregate_order_by(agent, result.stable_key))
        agents = select(func.coalesce(in_order, literal_column("'[]'::json"))).where(result.job_id == job.id)
    else:
        # SQLite aggregates the rows of an ordered subquery in their order.
        listed = (getattr(result, name) for name in AgentResult.model_fields)
        ordered = select(*listed).where(result.job_id == job.id).order_by(result.stable_key)
        rows = ordered.correlate(job).subquery()
        agents = select(func.json(func.json_group_array(model_json_of(dialect, AgentResult, rows.c))))
    made = model_json_of(
        dialect,
        DeploymentJob,
        job,
        agents=agents.scalar_subquery(),
        change_request=stored_json(dialect, job.change_request),
        violations=stored_json(dialect, func.coalesce(job.policy_violations, _empty_list(dialect))),
        rollout=_rollout_json(dialect),
    )
    return json_text(dialect, made)


def _rollout_json(dialect: str) -> ColumnElement[Any]:
    """The stored rollout (null without a strategy) with its `nextWaveAt` from the column the
    worker's claim reads (DeploymentJobRow.rollout)."""
    job = DeploymentJobRow
    at = wire_timestamp(dialect, job.next_wave_at)
    if dialect == "postgresql":
        value = func.coalesce(func.to_jsonb(at), literal_column("'null'::jsonb"))
        return func.jsonb_set(cast(job.rollout_state, JSONB), literal_column("'{nextWaveAt}'"), value)
    return func.json_set(job.rollout_state, literal_column("'$.nextWaveAt'"), at)


def _empty_list(dialect: str) -> ColumnElement[Any]:
    return literal_column("'[]'::json" if dialect == "postgresql" else "'[]'")

"""The status matrix read: a page of agents by every environment, put together as JSON text by the
database from the cells the evaluation (service/deployments/states.py) stored.

A page is kept in this process under the org's status version, which triggers move with every
change to what the matrix reads (a pair's state, an agent's name, version or archiving, an
environment's name, the org's threshold; migration 0023). The version is read from the database on
every request, so a change made through any process is seen at once; a repeated request costs that
primary-key read. The version is read before the page: a page may show more than its version says
(and is made again once that version is read), never less.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Integer,
    Select,
    Subquery,
    and_,
    bindparam,
    exists,
    func,
    literal,
    literal_column,
    null,
    or_,
    select,
    true,
)
from sqlalchemy.dialects.postgresql import aggregate_order_by
from sqlalchemy.orm import Session

from api.deployments import AGENT_STATES, DEFAULT_STALE_AFTER_DAYS, AgentStatus, EnvironmentRef, StatusMatrix
from service.agents.models import AgentRow
from service.deployments.models import DeploymentPolicyRow, DeploymentStateRow, DeploymentStatusVersionRow
from service.environments.models import EnvironmentRow
from service.http.responses import splice_json
from service.storage.db import dialect_name
from service.storage.jsonsql import json_text, model_json
from service.storage.memory import Kept

# A default page (50 agents by 20 environments) is about 400 KB.
KEPT_BYTES = 32 * 1024 * 1024
_kept = Kept[str](KEPT_BYTES, cost=len)


@dataclass(frozen=True)
class MatrixPage:
    """Which page of the matrix is asked for (each filter optional)."""

    environment_id: str | None
    stable_key: str | None
    states: tuple[str, ...]
    limit: int
    offset: int


def status_matrix(session: Session, org_id: str, page: MatrixPage) -> str:
    """A page of agents (by stableKey) by every environment (by name), as JSON text (a `StatusMatrix`):
    kept from an earlier request while the org's status version is unchanged."""
    key = (org_id, status_version(session, org_id), page)
    return _kept.get_or_make(key, lambda: make_status_matrix(session, org_id, page))


def status_version(session: Session, org_id: str) -> int:
    model = DeploymentStatusVersionRow
    return session.scalar(select(model.version).where(model.org_id == org_id)) or 0


def make_status_matrix(session: Session, org_id: str, page: MatrixPage) -> str:
    """The page `status_matrix` keeps, read from the database.

    A page is 50 agents by every environment by default: each deployed pair's cell is the text its
    last evaluation stored, and the answer is put together as text, never as thousands of models.
    """
    statements = _matrix_statements(
        dialect_name(session),
        by_environment=page.environment_id is not None,
        by_agent=page.stable_key is not None,
        states=page.states,
    )
    values: dict[str, Any] = {
        "org_id": org_id,
        "environment_id": page.environment_id,
        "stable_key": page.stable_key,
        "limit": page.limit,
        "offset": page.offset,
    }
    environments = session.execute(statements.environments, values).all()
    values["environments"] = len(environments)
    total, agents, all_environments, stale_after_days = session.execute(statements.head, values).one()
    stored = dict(session.execute(statements.counts, values).all())
    counts = dict.fromkeys(AGENT_STATES, 0) | stored
    counts["not_deployed"] = agents * all_environments - sum(stored.values())
    cells = session.scalar(statements.cells, values)
    head = StatusMatrix(
        stale_after_days=stale_after_days or DEFAULT_STALE_AFTER_DAYS,
        environments=[EnvironmentRef(id=env_id, name=name) for env_id, name in environments],
        items=[],
        counts=counts,
        limit=page.limit,
        offset=page.offset,
        total_agents=total,
    )
    return splice_json(head, items=f"[{cells or ''}]")


@dataclass(frozen=True)
class _MatrixStatements:
    """The reads of one shape of status page, over the parameters org_id, environment_id,
    stable_key, limit, offset and environments (how many the page has)."""

    environments: Select[Any]
    head: Select[Any]  # agents matching, active agents, environments, stale threshold
    counts: Select[Any]  # stored pairs per state over the org
    cells: Select[Any]


@functools.cache
def _matrix_statements(
    dialect: str, *, by_environment: bool, by_agent: bool, states: tuple[str, ...]
) -> _MatrixStatements:
    """Built once per shape: building and keying these statements cost more than running them."""
    org_id = bindparam("org_id")
    environments = select(EnvironmentRow.id, EnvironmentRow.name).where(EnvironmentRow.org_id == org_id)
    if by_environment:
        environments = environments.where(EnvironmentRow.id == bindparam("environment_id"))
    active = [AgentRow.org_id == org_id, AgentRow.archived_at.is_(None)]
    matching = list(active)
    if by_agent:
        matching.append(AgentRow.stable_key == bindparam("stable_key"))
    if states:
        matching.append(_has_pair_in(states, by_environment=by_environment))

    def count(model: Any, *conditions: ColumnElement[bool]) -> Any:
        return select(func.count(model.id)).where(*conditions).scalar_subquery()

    threshold = select(DeploymentPolicyRow.stale_after_days).where(DeploymentPolicyRow.org_id == org_id)
    head = select(
        count(AgentRow, *matching),
        count(AgentRow, *active),
        count(EnvironmentRow, EnvironmentRow.org_id == org_id),
        threshold.scalar_subquery(),
    )
    # Read from the (org_id, state) index alone: archived agents' rows are gone (forget_agent).
    counts = (
        select(DeploymentStateRow.state, func.count())
        .where(DeploymentStateRow.org_id == org_id)
        .group_by(DeploymentStateRow.state)
    )
    page = (
        select(AgentRow.id, AgentRow.stable_key, AgentRow.name, AgentRow.latest_version)
        .where(*matching)
        .order_by(AgentRow.stable_key)
        .limit(bindparam("limit", type_=Integer))
        .offset(bindparam("offset", type_=Integer))
        .subquery("page")
    )
    cells = _cells_statement(dialect, page, environments.subquery("envs"), states)
    return _MatrixStatements(environments.order_by(EnvironmentRow.name), head, counts, cells)


def _has_pair_in(states: Sequence[str], *, by_environment: bool) -> ColumnElement[bool]:
    """Agents with at least one pair (in the environment, if one is named) in one of `states`."""
    in_scope = [DeploymentStateRow.agent_id == AgentRow.id]
    if by_environment:
        in_scope.append(DeploymentStateRow.environment_id == bindparam("environment_id"))
    options: list[ColumnElement[bool]] = []
    stored = [state for state in states if state != "not_deployed"]
    if stored:
        options.append(exists().where(*in_scope, DeploymentStateRow.state.in_(stored)))
    if "not_deployed" in states:
        # Fewer rows than environments: some pair has none. Rows of deleted environments go with them.
        deployed = select(func.count()).select_from(DeploymentStateRow).where(*in_scope).scalar_subquery()
        options.append(deployed < bindparam("environments", type_=Integer))
    return or_(*options)


def _cells_statement(dialect: str, page: Subquery, envs: Subquery, states: Sequence[str]) -> Select[Any]:
    """The page's cells (AgentStatus JSON), agent by agent and environment by environment, joined
    into one text by the database: a deployed pair's cell is the text its last evaluation stored, any
    other is made here. A thousand cells cost a tenth as much as reading them into Python one by one."""
    postgres = dialect == "postgresql"
    pairs = page.join(envs, true()).outerjoin(
        DeploymentStateRow,
        and_(DeploymentStateRow.agent_id == page.c.id, DeploymentStateRow.environment_id == envs.c.id),
    )
    order = (page.c.stable_key, envs.c.name)
    wanted = [func.coalesce(DeploymentStateRow.state, "not_deployed").in_(states)] if states else []
    if postgres:
        cell = _cell(dialect, DeploymentStateRow.__table__, page.c, envs.c.id)
        joined = func.string_agg(cell, aggregate_order_by(literal(","), *order))
        return select(joined).select_from(pairs).where(*wanted)
    # SQLite sorts the pairs by their keys alone, then reads each stored cell by rowid in that order
    # (it aggregates the rows of an ordered subquery in order): sorting the cells themselves, a few
    # hundred bytes each, would cost a third of the query.
    columns = (page.c.stable_key, page.c.name, page.c.latest_version, envs.c.id.label("environment_id"))
    rowid = literal_column(f"{DeploymentStateRow.__tablename__}.rowid").label("pair")
    ordered = select(*columns, rowid).select_from(pairs).where(*wanted).order_by(*order).subquery()
    stored = DeploymentStateRow.__table__.alias("stored")
    cell = _cell(dialect, stored, ordered.c, ordered.c.environment_id)
    read = ordered.outerjoin(stored, literal_column("stored.rowid") == ordered.c.pair)
    return select(func.group_concat(cell, ",")).select_from(read)


def _cell(dialect: str, pair: Any, agent: Any, environment_id: ColumnElement[str]) -> ColumnElement[str]:
    """A pair's cell: the text its last evaluation stored in `pair` (a deployment_states table), or
    one made from what the page knows (`agent`: stable_key, name, latest_version) for a pair without
    one. Every field of AgentStatus, in its order; what is not known is null."""
    postgres = dialect == "postgresql"
    empty_list = literal_column("'[]'::json" if postgres else "json('[]')")
    known = {
        "stable_key": agent.stable_key,
        "agent_name": agent.name,
        "environment_id": environment_id,
        "state": func.coalesce(pair.c.state, "not_deployed"),
        "latest_version": agent.latest_version,
        "drift": empty_list,
        "newer": empty_list,
    }
    made = model_json(
        dialect, AgentStatus, {name: known.get(name, null()) for name in AgentStatus.model_fields}
    )
    # A pair the upgrade added but the worker has not evaluated yet has no cell text.
    return func.coalesce(func.nullif(pair.c.cell, ""), json_text(dialect, made))

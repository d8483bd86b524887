"""Lead time for changes, DORA's fourth key: for each agent version that reaches a production
environment (one marked `production`, or the last on a promotion path: it promotes from another and
none promotes from it), the time from the version's creation to its first complete deployment
there. Per environment, its own first; over all of them, the first anywhere. Counted in the period
of that first deployment; the median is exact.

SQL finds each version's first arrival in each production environment (one row per version and
environment, however many jobs); the medians over those rows are numpy's."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime

import numpy as np
from sqlalchemy import and_, func, or_, select
from sqlalchemy.orm import Session

from service.agents.models import AgentVersionRow
from service.deployments.models import DeploymentJobAgentRow, DeploymentJobRow
from service.deployments.ranges import period_start
from service.environments.models import EnvironmentRow


def production_environments(session: Session, *, org_id: str) -> tuple[str, ...]:
    """The organization's production environments' ids, in id order."""
    followed = select(EnvironmentRow.promotes_from).where(
        EnvironmentRow.org_id == org_id, EnvironmentRow.promotes_from.is_not(None)
    )
    last_on_a_path = and_(EnvironmentRow.promotes_from.is_not(None), EnvironmentRow.id.not_in(followed))
    query = select(EnvironmentRow.id).where(
        EnvironmentRow.org_id == org_id, or_(EnvironmentRow.production.is_(True), last_on_a_path)
    )
    return tuple(session.scalars(query.order_by(EnvironmentRow.id)))


@dataclass(frozen=True)
class Arrival:
    """A version's first complete deployment in a production environment."""

    version: tuple[str, int]  # agent id, number
    environment_id: str
    reached_at: datetime
    lead_seconds: float


def arrivals(session: Session, *, org_id: str, environment_ids: Sequence[str]) -> list[Arrival]:
    if not environment_ids:
        return []
    agent, job, version = DeploymentJobAgentRow, DeploymentJobRow, AgentVersionRow
    first = (
        select(
            agent.agent_id, agent.version, job.environment_id, func.min(job.finished_at).label("reached_at")
        )
        .join(job, job.id == agent.job_id)
        .where(job.org_id == org_id, job.environment_id.in_(environment_ids), agent.status == "complete")
        .group_by(agent.agent_id, agent.version, job.environment_id)
        .subquery()
    )
    query = select(first, version.created_at).join(
        version, and_(version.agent_id == first.c.agent_id, version.number == first.c.version)
    )
    return [
        Arrival((agent_id, number), environment_id, reached_at, (reached_at - created_at).total_seconds())
        for agent_id, number, environment_id, reached_at, created_at in session.execute(query)
    ]


def median_lead_times(
    found: Sequence[Arrival], *, environments: Sequence[str], firsts: Sequence[date], period: str
) -> dict[tuple[int, int], float]:
    """Median lead times by cell (environment index, with `len(environments)` for all of them;
    period index, with `len(firsts)` for the whole range), as service.deployments.metrics lays
    them out. Arrivals outside the periods count nowhere."""
    at = {environment: index for index, environment in enumerate(environments)}
    period_at = {first: index for index, first in enumerate(firsts)}
    everywhere: dict[tuple[str, int], Arrival] = {}
    for arrival in found:
        earliest = everywhere.get(arrival.version)
        if earliest is None or arrival.reached_at < earliest.reached_at:
            everywhere[arrival.version] = arrival
    samples: dict[tuple[int, int], list[float]] = {}
    counted = [(at.get(a.environment_id), a) for a in found] + [
        (len(environments), a) for a in everywhere.values()
    ]
    for environment, arrival in counted:
        period_index = period_at.get(period_start(arrival.reached_at.date(), period))
        if environment is None or period_index is None:
            continue
        for cell in ((environment, period_index), (environment, len(firsts))):
            samples.setdefault(cell, []).append(arrival.lead_seconds)
    return {cell: float(np.median(values)) for cell, values in samples.items()}

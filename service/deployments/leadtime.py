"""Lead time for changes, DORA's fourth key: for each agent version that reaches a production
environment (one marked `production`, or the last on a promotion path: it promotes from another and
none promotes from it), the time from the version's creation to its first complete deployment
there. Per environment, its own first; over all of them, the first anywhere. Counted in the period
of that first deployment; the median is exact.

Each version's first arrival in each environment is kept at job end (service.deployments.rollups,
one row per version and environment, however many jobs); a read takes the production
environments' rows up to the range's end, and numpy reads the exact medians over them. Which
environments are production is asked on every read, so marking one changes the answer at once."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

import numpy as np
from sqlalchemy import and_, or_, select
from sqlalchemy.orm import Session

from service.deployments.models import DeploymentArrivalRow
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


def arrivals(session: Session, *, org_id: str, environment_ids: Sequence[str], until: date) -> list[Arrival]:
    """The kept arrivals in these environments up to the end of day `until` (later ones count in
    no period, and no earlier arrival elsewhere depends on them)."""
    if not environment_ids:
        return []
    model = DeploymentArrivalRow
    end = datetime.combine(until + timedelta(days=1), time(), UTC)
    query = select(
        model.agent_id, model.version, model.environment_id, model.reached_at, model.lead_seconds
    ).where(model.org_id == org_id, model.environment_id.in_(environment_ids), model.reached_at < end)
    return [
        Arrival((agent_id, number), environment_id, reached_at, lead_seconds)
        for agent_id, number, environment_id, reached_at, lead_seconds in session.execute(query)
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

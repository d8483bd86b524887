"""Lead time for changes, DORA's fourth key: for each agent version that reaches a production
environment (one marked `production`, or the last on a promotion path: it promotes from another and
none promotes from it), the time from the version's creation to its first complete deployment
there. Per environment, its own first; over all of them, the first anywhere. Counted in the period
of that first deployment; the median is exact.

Each version's first arrival in each environment is kept at job end (service.deployments.rollups,
one row per version and environment, however many jobs); a read takes the production
environments' rows in the range, and numpy reads the exact medians over them. Which environments
are production is asked on every read, so marking one changes the answer at once."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime, time, timedelta

import numpy as np
from sqlalchemy import and_, func, or_, select
from sqlalchemy.orm import Session

from service.deployments.dialects import utc_day
from service.deployments.models import DeploymentArrivalRow
from service.environments.models import EnvironmentRow
from service.storage.db import dialect_name


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


def median_lead_times(
    session: Session,
    *,
    org_id: str,
    production: Sequence[str],
    environments: Sequence[str],
    firsts: Sequence[date],
    start: date,
    end: date,
) -> dict[tuple[int, int], float]:
    """Median lead times by cell (environment index in `environments`, with `len(environments)` for
    all of them; period index in `firsts`, with `len(firsts)` for the whole range), as
    service.deployments.metrics lays them out, of the arrivals in `production` from `start` to `end`.

    Two reads of the arrivals kept: each environment's in the range, and each version's first over
    all of them, when that first falls in the range. A version's lead times differ only by their
    arrivals (its creation is one moment), so its first arrival also has its least lead time."""
    if not production:
        return {}
    model, dialect = DeploymentArrivalRow, dialect_name(session)
    since = datetime.combine(start, time(), UTC)
    until = datetime.combine(end + timedelta(days=1), time(), UTC)
    kept = (model.org_id == org_id, model.environment_id.in_(production))
    own = select(model.environment_id, utc_day(dialect, model.reached_at), model.lead_seconds).where(
        *kept, model.reached_at >= since, model.reached_at < until
    )
    first = func.min(model.reached_at)
    anywhere = (
        select(utc_day(dialect, first), func.min(model.lead_seconds))
        .where(*kept)
        .group_by(model.agent_id, model.version)
        .having(first >= since, first < until)
    )
    at = {environment: index for index, environment in enumerate(environments)}
    rows = [(at[e], day, lead) for e, day, lead in session.execute(own) if e in at]
    rows += [(len(environments), day, lead) for day, lead in session.execute(anywhere)]
    if not rows:
        return {}
    environment_index, days, leads = zip(*rows, strict=True)
    starts = np.array(firsts, dtype="datetime64[D]")
    period_index = np.searchsorted(starts, np.array(days, dtype="datetime64[D]"), side="right") - 1
    width = len(firsts) + 1
    environment_cells = np.array(environment_index) * width
    cells = np.concatenate([environment_cells + period_index, environment_cells + len(firsts)])
    found = _medians(cells, np.tile(np.array(leads, dtype=float), 2))
    return {(cell // width, cell % width): median for cell, median in found.items()}


def _medians(cells: np.ndarray, values: np.ndarray) -> dict[int, float]:
    """The exact median of the values of each cell: sorted by cell and value, the middle one (or
    the mean of the middle two) of each cell's run."""
    order = np.lexsort((values, cells))
    cells, values = cells[order], values[order]
    found, starts, counts = np.unique(cells, return_index=True, return_counts=True)
    middles = (values[starts + (counts - 1) // 2] + values[starts + counts // 2]) / 2
    return dict(zip(found.tolist(), middles.tolist(), strict=True))

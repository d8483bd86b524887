"""Analytics answers kept between requests.

A heatmap or the metrics of a range are made from the rollups, which change only in a transaction
that also moves the org's rollup version (a job ending, a rebuild). An answer is kept in this
process under what it was made from: the request, the version, today's date (ranges end today by
default and frequencies divide by elapsed days) and the names it shows. A request after any of
those has moved makes the answer afresh, in whichever process serves it, since the version is
read from the database every time; a repeated one costs that primary-key read.

The version is read before the rollups: an answer may then show rollups newer than its version
(and is made again once that version is read), never older.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.deployments.models import DeploymentRollupVersionRow
from service.storage.db import upsert, utcnow
from service.storage.memory import Kept

# About 100 KB each at most (a year's heatmap by day of 20 environments is 74 KB).
KEPT_ANSWERS = 256
_kept = Kept[str](KEPT_ANSWERS)


def kept_answer(session: Session, org_id: str, request: Hashable, make: Callable[[], str]) -> str:
    """The answer (JSON text) `make` gives for `request`: kept from an earlier call while the org's
    rollups and today's date are unchanged. `request` holds everything else the answer depends on:
    its parameters and the names it shows."""
    return _kept.get_or_make((org_id, rollup_version(session, org_id), utcnow().date(), request), make)


def rollup_version(session: Session, org_id: str) -> int:
    model = DeploymentRollupVersionRow
    return session.scalar(select(model.version).where(model.org_id == org_id)) or 0


def rollups_changed(session: Session, org_id: str) -> None:
    """Move the org's rollup version, in the transaction that changes its rollups: one statement,
    safe under concurrent workers."""
    model = DeploymentRollupVersionRow
    statement = upsert(session, model).values(org_id=org_id, version=1)
    session.execute(
        statement.on_conflict_do_update(index_elements=[model.org_id], set_={"version": model.version + 1})
    )

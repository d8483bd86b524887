"""Pruning by age. Every kind is pruned through its primary key: ids sort as their times do
(service.storage.ids), so "older than the cutoff" is an id range, and no index on a time column is
needed. Each statement deletes at most `retention_batch_size` rows in a transaction of its own, so
no lock is held long and writers carry on between batches; a round prunes at most
MAX_BATCHES_PER_ROUND of them per kind, and the worker comes back at once while there is more.

Audit events are pruned only where an export has covered them (the database refuses any other
deletion, migration 0033); events past their retention that no export covers are kept, counted in a
gauge and named in a warning.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

from sqlalchemy import ColumnElement, Delete, Select, delete, func, select
from sqlalchemy.orm import InstrumentedAttribute, Session

from api.deployments import FINISHED_JOB_STATUSES
from service.deployments.models import DeploymentJobAgentRow, DeploymentJobRow
from service.events.models import EventRow
from service.notifications.models import DeliveryLogRow, DeliveryRow
from service.observability import metrics
from service.settings import Settings
from service.signin.models import SignInSessionRow
from service.storage.db import Database, utcnow
from service.storage.ids import first_id_at
from service.trail.models import AuditEventRow, AuditExportRow

logger = logging.getLogger("orgdeck.retention")

MAX_BATCHES_PER_ROUND = 10
# An idle worker looks for prunable rows this often, not every round: ages change slowly.
IDLE_PASS_SECONDS = 60.0
HELD_COUNT_LIMIT = 100_000
_next_pass_at = [0.0]  # monotonic time of this process's next pass
FINISHED_DELIVERY_STATUSES = ("sent", "dead")


@dataclass(frozen=True)
class Kind:
    """One kind of record retention prunes: its setting, the id it is pruned by, and the oldest
    rows before a cutoff id (the conditions that make a row prunable besides its age)."""

    name: str
    days: Callable[[Settings], float]
    id_prefix: str
    model: type
    key: InstrumentedAttribute[str]
    conditions: Callable[[], tuple[ColumnElement[bool], ...]] = tuple

    def oldest(self, cutoff_id: str, size: int, after: str = "") -> Select[tuple[str]]:
        prunable = (self.key >= after, self.key < cutoff_id, *self.conditions())
        return select(self.key).where(*prunable).order_by(self.key).limit(size)

    def batch(self, cutoff_id: str, size: int, after: str = "") -> Delete:
        """The oldest `size` prunable rows from `after` on, deleted, answering their keys. A batch
        starts where the one before it ended: from the table's start, each would walk again over
        the index entries every earlier batch left dead (PostgreSQL keeps them until a vacuum),
        which at 10,000,000 rows made the last batches of a large prune take seconds."""
        doomed = self.oldest(cutoff_id, size, after).scalar_subquery()
        return delete(self.model).where(self.key.in_(doomed)).returning(self.key)

    def prune_batch(self, session: Session, cutoff_id: str, size: int, after: str = "") -> list[str]:
        """Prune one batch; the keys it deleted (a batch of fewer than `size` is the last)."""
        return list(session.scalars(self.batch(cutoff_id, size, after)))


def _finished_delivery() -> tuple[ColumnElement[bool], ...]:
    return (DeliveryRow.status.in_(FINISHED_DELIVERY_STATUSES),)


def _ended_job() -> tuple[ColumnElement[bool], ...]:
    """The job of a per-agent row has ended (its id, the row's job_id, dates its creation)."""
    ended = select(DeploymentJobRow.id).where(
        DeploymentJobRow.id == DeploymentJobAgentRow.job_id,
        DeploymentJobRow.status.in_(FINISHED_JOB_STATUSES),
    )
    return (ended.exists(),)


def _delivered_event() -> tuple[ColumnElement[bool], ...]:
    """Fanned out, and no delivery left that was made of it (deliveries, pruned first, cascade from
    their event: an event goes only once its deliveries have)."""
    delivery = select(DeliveryRow.id).where(DeliveryRow.event_id == EventRow.id)
    return (EventRow.fanned_out_at.is_not(None), ~delivery.exists())


def _expired_session() -> tuple[ColumnElement[bool], ...]:
    """Its token no longer verifies, so the row no longer answers anything (a sign-out included)."""
    return (SignInSessionRow.expires_at < utcnow(),)


def _covered_by_export() -> tuple[ColumnElement[bool], ...]:
    export = AuditExportRow
    covering = select(export.id).where(
        export.org_id == AuditEventRow.org_id,
        export.covers_from_id <= AuditEventRow.id,
        AuditEventRow.id < export.covers_to_id,
        export.completed_at.is_not(None),
    )
    return (covering.exists(),)


KINDS = (
    Kind(
        "notification_logs",
        lambda s: s.retention_notification_logs_days,
        "log",
        DeliveryLogRow,
        DeliveryLogRow.id,
    ),
    Kind(
        "deliveries",
        lambda s: s.retention_deliveries_days,
        "msg",
        DeliveryRow,
        DeliveryRow.id,
        _finished_delivery,
    ),
    Kind(
        "audit_events",
        lambda s: s.retention_audit_events_days,
        "aud",
        AuditEventRow,
        AuditEventRow.id,
        _covered_by_export,
    ),
    Kind("events", lambda s: s.retention_events_days, "evt", EventRow, EventRow.id, _delivered_event),
    Kind(
        "sign_in_sessions",
        lambda s: s.retention_sign_in_sessions_days,
        "sis",
        SignInSessionRow,
        SignInSessionRow.id,
        _expired_session,
    ),
    # A job's agents share its id: a batch may end inside a job, the next one takes the rest.
    Kind(
        "job_details",
        lambda s: s.retention_job_details_days,
        "job",
        DeploymentJobAgentRow,
        DeploymentJobAgentRow.job_id,
        _ended_job,
    ),
)


def prune(db: Database, settings: Settings) -> bool:
    """Worker task: a pass over every kind when one is due (at once while there is more to prune,
    else every IDLE_PASS_SECONDS); True while a kind has more to prune."""
    if time.monotonic() < _next_pass_at[0]:
        return False
    more = prune_pass(db, settings).more
    _next_pass_at[0] = 0.0 if more else time.monotonic() + IDLE_PASS_SECONDS
    return more


@dataclass
class Pass:
    pruned: dict[str, int] = field(default_factory=dict)
    more: bool = False


def prune_pass(db: Database, settings: Settings) -> Pass:
    """Prune every kind past its retention, up to MAX_BATCHES_PER_ROUND batches of each; log and
    count what was pruned."""
    done = Pass()
    for kind in KINDS:
        days = kind.days(settings)
        if not days:
            continue
        cutoff_id = first_id_at(kind.id_prefix, utcnow() - timedelta(days=days))
        pruned, more_of_kind = _prune_kind(db, kind, cutoff_id, settings.retention_batch_size)
        done.more = done.more or more_of_kind
        done.pruned[kind.name] = pruned
        if pruned:
            metrics.RETENTION_PRUNED.labels(kind=kind.name).inc(pruned)
            logger.info("Retention pruned %d %s older than %g days", pruned, kind.name, days)
    if settings.retention_audit_events_days:
        _report_unexported(db, settings.retention_audit_events_days)
    return done


def _prune_kind(db: Database, kind: Kind, cutoff_id: str, size: int) -> tuple[int, bool]:
    pruned, after = 0, ""
    for _ in range(MAX_BATCHES_PER_ROUND):
        # A read first: an idle worker must not take SQLite's write lock every round.
        with db.session() as session:
            if not _has_any(session, kind, cutoff_id, after):
                return pruned, False
        with db.session(write=True) as session:
            deleted = kind.prune_batch(session, cutoff_id, size, after)
        pruned += len(deleted)
        if len(deleted) < size:
            return pruned, False
        # Not past it: a key may be shared (a job's agents), and the batch may have ended inside it.
        after = max(deleted)
    return pruned, True


def _has_any(session: Session, kind: Kind, cutoff_id: str, after: str) -> bool:
    return session.execute(kind.oldest(cutoff_id, 1, after)).first() is not None


def _report_unexported(db: Database, days: float) -> None:
    """Say loudly that audit events past their retention are kept because no export covers them.
    Counted up to HELD_COUNT_LIMIT (a pass must not scan a trail nobody exports in full)."""
    cutoff_id = first_id_at("aud", utcnow() - timedelta(days=days))
    held_ids = (
        select(AuditEventRow.id)
        .where(AuditEventRow.id < cutoff_id, ~_covered_by_export()[0])
        .limit(HELD_COUNT_LIMIT)
        .subquery()
    )
    with db.session() as session:
        held = session.scalar(select(func.count()).select_from(held_ids)) or 0
    metrics.RETENTION_HELD_AUDIT_EVENTS.set(held)
    if held:
        logger.warning(
            "Retention keeps %s audit events older than %g days: no export covers them "
            "(GET /audit-events/export, or `orgdeck audit export`, then they are pruned)",
            f"{held}" if held < HELD_COUNT_LIMIT else f"at least {held}",
            days,
        )

"""Exporting the audit trail: every event of a range, oldest first, as NDJSON (one AuditEvent per
line), in keyset pages on (org_id, id) read in short sessions of their own, so memory stays constant
however many events there are. The export is recorded when it starts (its audit event names who
took it) and marked complete once its last line is out: retention prunes only what a completed
export covers (service.retention)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import Select, select, update
from sqlalchemy.orm import Session

from api.audit import AuditExportQuery
from service.audit.service import EVENT_PREFIX, event_json
from service.errors import InvalidInput
from service.storage.db import Database, dialect_name, utcnow
from service.storage.ids import first_id_at
from service.trail.models import AuditEventRow, AuditExportRow

PAGE_SIZE = 1000
# An export ends at least this long before now: an event's id is taken when its transaction
# writes it, and a transaction still open when the export reads that moment would be missed.
SETTLE = timedelta(minutes=1)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Export:
    id: str
    org_id: str
    from_id: str
    to_id: str


def start_export(
    session: Session,
    *,
    org_id: str,
    key_id: str | None,
    member_email: str | None,
    query: AuditExportQuery,
) -> Export:
    """Record an export of `query`'s range (its end at most SETTLE before now) and return it."""
    end = min(query.date_range.end or utcnow(), utcnow() - SETTLE)
    start = query.date_range.start
    if start is not None and start >= end:
        raise InvalidInput(
            "dateRange: start must be before end (and end at least a minute ago)", field="dateRange"
        )
    row = AuditExportRow(
        org_id=org_id,
        covers_from_id=first_id_at(EVENT_PREFIX, start or EPOCH),
        covers_to_id=first_id_at(EVENT_PREFIX, end),
        range_start=start,
        range_end=end,
        actor_key_id=key_id,
        actor_member_email=member_email,
    )
    session.add(row)
    session.flush()
    return Export(id=row.id, org_id=org_id, from_id=row.covers_from_id, to_id=row.covers_to_id)


def event_lines(db: Database, export: Export) -> Iterator[bytes]:
    """The export's events as NDJSON, a page per chunk; the export is complete after the last."""
    after: str | None = None
    while True:
        with db.session() as session:
            page = session.execute(_page(session, export, after)).all()
        if page:
            yield "".join(f"{row.event}\n" for row in page).encode()
        if len(page) < PAGE_SIZE:
            break
        after = page[-1].id
    with db.session(write=True) as session:
        session.execute(
            update(AuditExportRow).where(AuditExportRow.id == export.id).values(completed_at=utcnow())
        )


def _page(session: Session, export: Export, after: str | None) -> Select[tuple[str, str]]:
    event = AuditEventRow
    lower = event.id > after if after is not None else event.id >= export.from_id
    return (
        select(event.id, event_json(dialect_name(session)))
        .where(event.org_id == export.org_id, lower, event.id < export.to_id)
        .order_by(event.id)
        .limit(PAGE_SIZE)
    )

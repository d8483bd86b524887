"""Recording events. Callers record in their own transaction, so an event exists iff its cause does.
An event is read by whoever its notifications reach: its payload is kept with credentials redacted."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from api.events import EVENT_TYPES
from service.events.models import EventRow
from service.observability import tracing
from service.redaction.objects import redacted


def record_event(session: Session, *, org_id: str, type: str, payload: dict[str, Any]) -> EventRow:
    if type not in EVENT_TYPES:
        raise ValueError(f"unknown event type {type!r}")
    event = EventRow(
        org_id=org_id, type=type, payload=redacted(payload), trace_context=tracing.current_traceparent()
    )
    session.add(event)
    session.flush()
    return event

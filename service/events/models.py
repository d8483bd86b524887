from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Index, String
from sqlalchemy.orm import Mapped, mapped_column

from service.storage.db import Base, UTCDateTime, utcnow
from service.storage.ids import new_id


class EventRow(Base):
    """Something that happened in an organization. Written once, in the transaction that caused it.

    `fanned_out_at` stays empty until notifications has turned the event into deliveries: the
    event table is the outbox, so an event committed is an event delivered, whatever crashes.
    """

    __tablename__ = "events"
    __table_args__ = (
        Index("ix_events_org_id_occurred_at", "org_id", "occurred_at"),
        Index("ix_events_fanned_out_at", "fanned_out_at"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=lambda: new_id("evt"))
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    type: Mapped[str] = mapped_column(String(40))
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    occurred_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    fanned_out_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # The W3C traceparent of what recorded it: its deliveries continue that trace.
    trace_context: Mapped[str | None] = mapped_column(String(55))

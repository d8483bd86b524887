from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Index, String
from sqlalchemy.orm import Mapped, mapped_column

from api.approvals import ChangeRequestRef
from service.storage.db import Base, UTCDateTime, WireJSON, utcnow
from service.storage.ids import new_id


class AuditEventRow(Base):
    """One change, appended in the transaction that made it; nothing updates, deletes or truncates
    it (the database refuses all three). Ids are time-ordered, so every page is a seek on (org_id, id)."""

    __tablename__ = "audit_events"
    __table_args__ = (
        Index("ix_audit_events_org_id_id", "org_id", "id"),
        Index("ix_audit_events_org_id_action_id", "org_id", "action", "id"),
        Index("ix_audit_events_org_id_target", "org_id", "target_type", "target_id", "id"),
        Index("ix_audit_events_org_id_actor_member", "org_id", "actor_member_id", "id"),
        Index("ix_audit_events_org_id_actor_key", "org_id", "actor_key_id", "id"),
        # Serves the counts per day and action (GET /audit-events/stats) from the index alone.
        Index("ix_audit_events_org_id_occurred_at_action", "org_id", "occurred_at", "action"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=lambda: new_id("aud"))
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id"))
    occurred_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    actor_key_id: Mapped[str | None] = mapped_column(String(40))
    actor_key_name: Mapped[str | None] = mapped_column(String(200))
    actor_member_id: Mapped[str | None] = mapped_column(String(40))
    actor_member_email: Mapped[str | None] = mapped_column(String(320))
    # How the actor proved who it is: an API key (null), the identity provider (`oidc`), or a trusted
    # workload's token (`workload`, with the claims its conditions matched).
    actor_via: Mapped[str | None] = mapped_column(String(20))
    actor_claims: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    action: Mapped[str] = mapped_column(String(100))
    target_type: Mapped[str | None] = mapped_column(String(40))
    target_id: Mapped[str | None] = mapped_column(String(200))
    target_name: Mapped[str | None] = mapped_column(String(300))
    request_id: Mapped[str | None] = mapped_column(String(128))
    changes: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    # A change applied by an approved change request: the request, its requester and the approvals
    # that applied it.
    change_request: Mapped[ChangeRequestRef | None] = mapped_column(WireJSON(ChangeRequestRef))


class AuditExportRow(Base):
    """An export of an organization's audit trail that was taken (GET /audit-events/export): the
    range of event ids it covered, who took it, and whether it streamed to its end. The database deletes an audit event only when a
    completed export covers it (migration 0033), so retention never prunes what nobody has kept."""

    __tablename__ = "audit_exports"
    __table_args__ = (Index("ix_audit_exports_org_id_covers_from_id", "org_id", "covers_from_id"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=lambda: new_id("aex"))
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id"))
    # Event ids in [covers_from_id, covers_to_id) were streamed (ids sort as their times do).
    covers_from_id: Mapped[str] = mapped_column(String(40))
    covers_to_id: Mapped[str] = mapped_column(String(40))
    range_start: Mapped[datetime | None] = mapped_column(UTCDateTime)
    range_end: Mapped[datetime] = mapped_column(UTCDateTime)
    actor_key_id: Mapped[str | None] = mapped_column(String(40))
    actor_member_email: Mapped[str | None] = mapped_column(String(320))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # Set once the last event was streamed: an export cut short covers nothing.
    completed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)

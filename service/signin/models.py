from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Index, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from service.storage.db import Base, UTCDateTime, utcnow
from service.storage.ids import new_id


class WorkloadIdentityRow(Base):
    """A CI platform's jobs an organization trusts: tokens of `issuer` for `audience` whose claims
    meet every condition act with `role`."""

    __tablename__ = "workload_identities"
    __table_args__ = (
        UniqueConstraint("org_id", "name", name="uq_workload_identities_org_id_name"),
        Index("ix_workload_identities_issuer", "issuer"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=lambda: new_id("wid"))
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(200))
    issuer: Mapped[str] = mapped_column(String(500))
    audience: Mapped[str] = mapped_column(String(500))
    # [{"claim": ..., "equals": ...} or {"claim": ..., "matches": <glob>}], all of which must hold.
    conditions: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    role: Mapped[str] = mapped_column(String(20))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)


class SignInSessionRow(Base):
    """One token of a person or a workload, from its first request (the sign-in) until it expires
    or is signed out. Only the token's SHA-256 is kept."""

    __tablename__ = "sign_in_sessions"

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=lambda: new_id("sis"))
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    member_id: Mapped[str | None] = mapped_column(String(40))
    workload_id: Mapped[str | None] = mapped_column(String(40))
    started_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)
    ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime)

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Index, String
from sqlalchemy.orm import Mapped, mapped_column, relationship

from service.members.models import MemberRow
from service.orgs.models import OrganizationRow
from service.storage.db import Base, UTCDateTime, utcnow
from service.storage.ids import new_id


class ApiKeyRow(Base):
    __tablename__ = "api_keys"
    __table_args__ = (Index("ix_api_keys_org_id_revoked_at", "org_id", "revoked_at"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=lambda: new_id("key"))
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(200))
    prefix: Mapped[str] = mapped_column(String(20))
    # SHA-256 of the whole key: keys are 190 random bits, so a fast hash cannot be brute-forced.
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # The most the key may do; a personal key never does more than its member's current role.
    role: Mapped[str] = mapped_column(String(20), default="admin")
    # The member it belongs to (a personal key), or none (a service key).
    member_id: Mapped[str | None] = mapped_column(ForeignKey("members.id"), index=True)

    org: Mapped[OrganizationRow] = relationship(lazy="joined")
    member: Mapped[MemberRow | None] = relationship(lazy="joined")

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from service.storage.db import Base, UTCDateTime, utcnow
from service.storage.ids import new_id


class MemberRow(Base):
    """A person of an organization. Never deleted: deactivated, so the audit trail keeps its actor."""

    __tablename__ = "members"
    __table_args__ = (UniqueConstraint("org_id", "email", name="uq_members_org_id_email"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=lambda: new_id("mem"))
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    # Stored lowercase: addresses are compared without case.
    email: Mapped[str] = mapped_column(String(320))
    name: Mapped[str] = mapped_column(String(200))
    role: Mapped[str] = mapped_column(String(20))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)
    deactivated_at: Mapped[datetime | None] = mapped_column(UTCDateTime)

    @property
    def active(self) -> bool:
        return self.deactivated_at is None

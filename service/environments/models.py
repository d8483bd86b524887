from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from service.db import Base, UTCDateTime, utcnow
from service.ids import new_id


class Environment(Base):
    """A deployment target of an organization: `builtin` (recorded here) or `webhook` (POSTed to)."""

    __tablename__ = "environments"
    __table_args__ = (UniqueConstraint("org_id", "name", name="uq_environments_org_id_name"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=lambda: new_id("env"))
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(100))
    description: Mapped[str] = mapped_column(String(2000), default="")
    target: Mapped[str] = mapped_column(String(20), default="builtin")
    webhook_url: Mapped[str | None] = mapped_column(String(2000))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)

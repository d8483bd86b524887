from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from service.storage.db import Base, UTCDateTime, utcnow
from service.storage.ids import new_id


class OrganizationRow(Base):
    __tablename__ = "organizations"

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=lambda: new_id("org"))
    slug: Mapped[str] = mapped_column(String(63), unique=True)
    name: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # Settings of reviewed changes (service.changes): policies need approval; open requests expire.
    policy_approval_required: Mapped[bool] = mapped_column(default=False)
    change_request_ttl_days: Mapped[int] = mapped_column(Integer, default=7)
    # Sign-in with the identity provider (service.signin): email domains whose people are made
    # members on their first sign-in, with this role; the identity provider's groups and the role
    # each grants.
    sign_in_domains: Mapped[list[str]] = mapped_column(JSON, default=list)
    sign_in_default_role: Mapped[str] = mapped_column(String(20), default="viewer")
    group_roles: Mapped[dict[str, str]] = mapped_column(JSON, default=dict)

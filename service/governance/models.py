from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from api.approvals import ChangeRequestRef
from service.storage.db import Base, UTCDateTime, WireJSON, utcnow
from service.storage.ids import new_id


class PolicyRow(Base):
    """A governance rule of an organization; its content as of now (earlier ones are its versions)."""

    __tablename__ = "governance_policies"
    __table_args__ = (
        UniqueConstraint("org_id", "name", name="uq_governance_policies_org_id_name"),
        Index("ix_governance_policies_org_id_category_severity", "org_id", "category", "severity"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=lambda: new_id("pol"))
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(200))
    description: Mapped[str] = mapped_column(String(2000), default="")
    category: Mapped[str] = mapped_column(String(20))
    severity: Mapped[str] = mapped_column(String(20))
    rule_text: Mapped[str] = mapped_column(Text)
    version: Mapped[int] = mapped_column(Integer, default=1)
    drafted_with: Mapped[str | None] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)

    versions: Mapped[list[PolicyVersionRow]] = relationship(
        order_by="PolicyVersionRow.version.desc()", cascade="all, delete-orphan", passive_deletes=True
    )


class PolicyVersionRow(Base):
    """The content of a policy at one version; never changed once written."""

    __tablename__ = "governance_policy_versions"
    __table_args__ = (
        UniqueConstraint("policy_id", "version", name="uq_governance_policy_versions_policy_id_version"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    policy_id: Mapped[str] = mapped_column(ForeignKey("governance_policies.id", ondelete="CASCADE"))
    version: Mapped[int] = mapped_column(Integer)
    name: Mapped[str] = mapped_column(String(200))
    description: Mapped[str] = mapped_column(String(2000))
    category: Mapped[str] = mapped_column(String(20))
    severity: Mapped[str] = mapped_column(String(20))
    rule_text: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # The approved change request that made it, if one did, as it was applied.
    change_request: Mapped[ChangeRequestRef | None] = mapped_column(WireJSON(ChangeRequestRef))

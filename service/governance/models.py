from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Index, Integer, String, Text, UniqueConstraint
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
    check: Mapped[str | None] = mapped_column(Text)
    message: Mapped[str | None] = mapped_column(Text)
    enforcement: Mapped[str] = mapped_column(String(10))
    scope: Mapped[dict[str, Any]] = mapped_column(JSON)
    examples: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
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
    check: Mapped[str | None] = mapped_column(Text)
    message: Mapped[str | None] = mapped_column(Text)
    enforcement: Mapped[str] = mapped_column(String(10))
    scope: Mapped[dict[str, Any]] = mapped_column(JSON)
    examples: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # The approved change request that made it, if one did, as it was applied.
    change_request: Mapped[ChangeRequestRef | None] = mapped_column(WireJSON(ChangeRequestRef))


class PolicyExceptionRow(Base):
    """Lets deployments through a deny policy for an agent, an environment or both, until it expires
    or is revoked (revoked ones are kept: the trail of who was let through)."""

    __tablename__ = "governance_policy_exceptions"
    __table_args__ = (Index("ix_governance_policy_exceptions_org_id_policy_id", "org_id", "policy_id"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=lambda: new_id("pex"))
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    policy_id: Mapped[str] = mapped_column(ForeignKey("governance_policies.id", ondelete="CASCADE"))
    agent_stable_key: Mapped[str | None] = mapped_column(String(200))
    environment_name: Mapped[str | None] = mapped_column(String(200))
    reason: Mapped[str] = mapped_column(String(2000))
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)
    created_by: Mapped[str] = mapped_column(String(320))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)

    @property
    def live(self) -> bool:
        """Not revoked and not expired."""
        return self.revoked_at is None and self.expires_at > utcnow()

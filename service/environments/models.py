from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Index, Integer, String, Text, UniqueConstraint, func, select, text
from sqlalchemy.orm import Mapped, column_property, mapped_column

from service.storage.db import Base, UTCDateTime, utcnow
from service.storage.ids import new_id


class EnvironmentRow(Base):
    """A deployment target of an organization: `builtin` (recorded here) or `webhook` (POSTed to)."""

    __tablename__ = "environments"
    __table_args__ = (
        UniqueConstraint("org_id", "name", name="uq_environments_org_id_name"),
        Index("ix_environments_org_id_target", "org_id", "target"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=lambda: new_id("env"))
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(100))
    description: Mapped[str] = mapped_column(String(2000), default="")
    target: Mapped[str] = mapped_column(String(20), default="builtin")
    webhook_url: Mapped[str | None] = mapped_column(String(2000))
    # Called after each wave of a deployment here, to pass or fail it (service.deployments.rollouts).
    verification_webhook_url: Mapped[str | None] = mapped_column(String(2000))
    # Deployments here go through change requests needing this many approvals (service.changes).
    protected: Mapped[bool] = mapped_column(default=False)
    required_approvals: Mapped[int] = mapped_column(Integer, default=1)
    # Its place on a promotion path and the gates before it (service.deployments.promotion): the
    # environment whose complete deployments it takes, whether a deployment here must have run there
    # first and for how long, and whether it counts as production for lead time. No foreign key:
    # SQLite adds one only by rebuilding the table, which would drop its triggers; deleting an
    # environment clears the paths from it (service.environments.service.delete_environment).
    promotes_from: Mapped[str | None] = mapped_column(String(40))
    require_promotion: Mapped[bool] = mapped_column(default=False)
    soak_minutes: Mapped[int] = mapped_column(Integer, default=0)
    production: Mapped[bool] = mapped_column(default=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)


ORG_WIDE = text("environment_id IS NULL")


class SecretRow(Base):
    """A named secret of an organization, org-wide or scoped to one environment, stored encrypted.

    One row per name and scope: writing the name again replaces the ciphertext and bumps `version`,
    so a rotated-out value is gone rather than kept around.
    """

    __tablename__ = "secrets"
    __table_args__ = (
        # Environment-scoped names are unique per environment; org-wide ones (NULL environment,
        # which a plain unique constraint treats as distinct) per organization.
        UniqueConstraint("environment_id", "name", name="uq_secrets_environment_id_name"),
        Index(
            "uq_secrets_org_wide_name",
            "org_id",
            "name",
            unique=True,
            sqlite_where=ORG_WIDE,
            postgresql_where=ORG_WIDE,
        ),
        Index("ix_secrets_org_id_environment_id", "org_id", "environment_id"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=lambda: new_id("sec"))
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    environment_id: Mapped[str | None] = mapped_column(ForeignKey("environments.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(128))
    # Fernet token of the value under the first configured key (see service.storage.crypto).
    ciphertext: Mapped[str] = mapped_column(Text)
    version: Mapped[int] = mapped_column(Integer, default=1)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # Set by the service on a new value only: re-encryption under a new key is not a change.
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


# Loaded with every environment in the same query: listings show it, and it is one index probe.
EnvironmentRow.secret_count = column_property(
    select(func.count(SecretRow.id)).where(SecretRow.environment_id == EnvironmentRow.id).scalar_subquery()
)


class DeploymentSigningKeyRow(Base):
    """The key an environment's webhook target verifies deployment manifests with, encrypted."""

    __tablename__ = "deployment_signing_keys"

    environment_id: Mapped[str] = mapped_column(
        ForeignKey("environments.id", ondelete="CASCADE"), primary_key=True
    )
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"), index=True)
    # Fernet token of the `whsec_…` value (see service.storage.crypto).
    ciphertext: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

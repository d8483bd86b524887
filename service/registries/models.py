from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from api.approvals import ChangeRequestRef
from service.orgs.models import OrganizationRow
from service.storage.db import Base, UTCDateTime, WireJSON, utcnow
from service.storage.ids import new_id


class RegistryRow(Base):
    """A named collection of prompt artifacts; soft deleted by setting `deleted_at`."""

    __tablename__ = "registries"
    # Unique even among deleted registries: a deleted name is restored, never silently reused.
    __table_args__ = (UniqueConstraint("org_id", "name", name="uq_registries_org_id_name"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=lambda: new_id("reg"))
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(63))
    visibility: Mapped[str] = mapped_column(String(10), default="private")
    description: Mapped[str] = mapped_column(String(2000), default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    deleted_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # Labels moved only through approved change requests (service.changes).
    protected_labels: Mapped[list[str]] = mapped_column(JSON, default=list)

    org: Mapped[OrganizationRow] = relationship(lazy="joined", innerjoin=True)


class RegistryArtifactRow(Base):
    __tablename__ = "registry_artifacts"
    __table_args__ = (UniqueConstraint("registry_id", "name", name="uq_registry_artifacts_registry_id_name"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=lambda: new_id("art"))
    registry_id: Mapped[str] = mapped_column(ForeignKey("registries.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(100))
    # The number of the newest version: the next publish takes version_count + 1.
    version_count: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class RegistryArtifactVersionRow(Base):
    """One published version. Never updated: there is no code path that writes to an existing row."""

    __tablename__ = "registry_artifact_versions"
    __table_args__ = (
        UniqueConstraint("artifact_id", "number", name="uq_registry_artifact_versions_artifact_id_number"),
        UniqueConstraint("artifact_id", "version", name="uq_registry_artifact_versions_artifact_id_version"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=lambda: new_id("ver"))
    artifact_id: Mapped[str] = mapped_column(ForeignKey("registry_artifacts.id", ondelete="CASCADE"))
    number: Mapped[int] = mapped_column(Integer)
    version: Mapped[str] = mapped_column(String(64))
    content_type: Mapped[str] = mapped_column(String(10))
    # The text itself, or the chat messages as canonical JSON.
    content: Mapped[str] = mapped_column(Text)
    content_hash: Mapped[str] = mapped_column(String(71))
    variables: Mapped[list[str]] = mapped_column(JSON, default=list)
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", JSON, default=dict)
    commit_message: Mapped[str] = mapped_column(String(2000), default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class RegistryArtifactLabelRow(Base):
    """A movable pointer: the primary key makes each label name one version of an artifact at most."""

    __tablename__ = "registry_artifact_labels"
    __table_args__ = (Index("ix_registry_artifact_labels_version_id", "version_id"),)

    artifact_id: Mapped[str] = mapped_column(
        ForeignKey("registry_artifacts.id", ondelete="CASCADE"), primary_key=True
    )
    label: Mapped[str] = mapped_column(String(40), primary_key=True)
    version_id: Mapped[str] = mapped_column(ForeignKey("registry_artifact_versions.id", ondelete="CASCADE"))
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # The approved change request that made its last move, if one did, as it was applied.
    change_request: Mapped[ChangeRequestRef | None] = mapped_column(WireJSON(ChangeRequestRef))

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Index, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from service.environments.models import EnvironmentRow
from service.storage.db import Base, UTCDateTime, utcnow
from service.storage.ids import new_id


class ToolRow(Base):
    """A tool the organization's agents can call, with the JSON Schema of its input."""

    __tablename__ = "tools"
    __table_args__ = (
        UniqueConstraint("org_id", "tool_key", name="uq_tools_org_id_tool_key"),
        Index("ix_tools_org_id_name", "org_id", "name"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=lambda: new_id("tool"))
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(200))
    tool_key: Mapped[str] = mapped_column(String(128))
    description: Mapped[str] = mapped_column(String(2000), default="")
    input_schema: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)


class ToolDeploymentRow(Base):
    """What runs of a tool (by key) in one environment: one row per pair, updated in place."""

    __tablename__ = "tool_deployment_records"
    __table_args__ = (
        UniqueConstraint(
            "environment_id", "tool_key", name="uq_tool_deployment_records_environment_id_tool_key"
        ),
        Index("ix_tool_deployment_records_org_id_tool_key", "org_id", "tool_key"),
        Index("ix_tool_deployment_records_org_id_tool_name", "org_id", "tool_name"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=lambda: new_id("tdr"))
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    environment_id: Mapped[str] = mapped_column(ForeignKey("environments.id", ondelete="CASCADE"))
    tool_key: Mapped[str] = mapped_column(String(128))
    tool_name: Mapped[str] = mapped_column(String(200))
    provider: Mapped[str] = mapped_column(String(200))
    tool_id: Mapped[str] = mapped_column(String(200))
    version: Mapped[str] = mapped_column(String(200))
    hash: Mapped[str] = mapped_column(String(200))
    tool_provider_config: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    deployed_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)

    environment: Mapped[EnvironmentRow] = relationship(lazy="joined")


class ToolDeploymentHistoryRow(Base):
    """A deployment that a newer version or hash replaced, kept for the record's history."""

    __tablename__ = "tool_deployment_history"
    __table_args__ = (Index("ix_tool_deployment_history_record_id_replaced_at", "record_id", "replaced_at"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=lambda: new_id("tdh"))
    record_id: Mapped[str] = mapped_column(ForeignKey("tool_deployment_records.id", ondelete="CASCADE"))
    provider: Mapped[str] = mapped_column(String(200))
    tool_id: Mapped[str] = mapped_column(String(200))
    version: Mapped[str] = mapped_column(String(200))
    hash: Mapped[str] = mapped_column(String(200))
    deployed_at: Mapped[datetime] = mapped_column(UTCDateTime)
    replaced_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

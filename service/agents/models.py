"""Agents: their drafts and catalogue data, tags and immutable versions, and the fleets that group
them (the fleets area, service.fleets, manages these)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Index, Integer, String, UniqueConstraint, and_, func, select
from sqlalchemy.orm import Mapped, column_property, foreign, mapped_column, relationship

from api.agents import AgentSnapshot, content_hash
from service.environments.models import EnvironmentRow
from service.storage.db import Base, UTCDateTime, utcnow
from service.storage.ids import new_id


class AgentRow(Base):
    """An agent's draft configuration and catalogue data. Archived agents keep their row and key."""

    __tablename__ = "agents"
    __table_args__ = (
        UniqueConstraint("org_id", "stable_key", name="uq_agents_org_id_stable_key"),
        Index("ix_agents_org_id_provider", "org_id", "provider"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=lambda: new_id("agent"))
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    stable_key: Mapped[str] = mapped_column(String(100))
    name: Mapped[str] = mapped_column(String(200))
    provider: Mapped[str] = mapped_column(String(64))
    provider_config: Mapped[dict[str, Any]] = mapped_column(JSON)
    prompt_references: Mapped[dict[str, str]] = mapped_column(JSON)
    fleet_id: Mapped[str | None] = mapped_column(ForeignKey("fleets.id", ondelete="SET NULL"), index=True)
    # The newest version's number, kept here so that numbering happens under the agent's row lock.
    latest_version: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)
    archived_at: Mapped[datetime | None] = mapped_column(UTCDateTime)

    tag_rows: Mapped[list[AgentTagRow]] = relationship(
        cascade="all, delete-orphan", lazy="selectin", order_by="AgentTagRow.tag"
    )
    newest: Mapped[AgentVersionRow | None] = relationship(
        primaryjoin=lambda: and_(
            foreign(AgentVersionRow.agent_id) == AgentRow.id,
            AgentVersionRow.number == AgentRow.latest_version,
        ),
        viewonly=True,
        lazy="selectin",
        uselist=False,
    )

    @property
    def tags(self) -> list[str]:
        return [row.tag for row in self.tag_rows]

    @property
    def draft(self) -> AgentSnapshot:
        return AgentSnapshot(
            name=self.name,
            provider=self.provider,
            provider_config=self.provider_config,
            prompt_references=self.prompt_references,
        )

    @property
    def draft_hash(self) -> str:
        return content_hash(self.draft)

    @property
    def has_unversioned_changes(self) -> bool:
        return self.newest is None or self.newest.content_hash != self.draft_hash


class AgentTagRow(Base):
    """One tag of an agent: a row each, so that "has every one of these tags" is an indexed query."""

    __tablename__ = "agent_tags"
    __table_args__ = (Index("ix_agent_tags_tag_agent_id", "tag", "agent_id"),)

    agent_id: Mapped[str] = mapped_column(ForeignKey("agents.id", ondelete="CASCADE"), primary_key=True)
    tag: Mapped[str] = mapped_column(String(64), primary_key=True)


class AgentVersionRow(Base):
    """An immutable snapshot of an agent's draft, numbered 1, 2, 3… per agent. Never updated."""

    __tablename__ = "agent_versions"
    __table_args__ = (UniqueConstraint("agent_id", "number", name="uq_agent_versions_agent_id_number"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=lambda: new_id("agv"))
    agent_id: Mapped[str] = mapped_column(ForeignKey("agents.id", ondelete="CASCADE"))
    number: Mapped[int] = mapped_column(Integer)
    content_hash: Mapped[str] = mapped_column(String(64))
    snapshot: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    agent: Mapped[AgentRow] = relationship(lazy="joined", viewonly=True)

    @property
    def stable_key(self) -> str:
        return self.agent.stable_key

    @property
    def version(self) -> int:
        return self.number


class FleetRow(Base):
    """A named group of an organization's agents, and the environments they are meant to run in."""

    __tablename__ = "fleets"
    __table_args__ = (UniqueConstraint("org_id", "name", name="uq_fleets_org_id_name"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=lambda: new_id("fleet"))
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    description: Mapped[str] = mapped_column(String(2000), default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)

    environment_links: Mapped[list[FleetEnvironmentRow]] = relationship(
        cascade="all, delete-orphan", lazy="selectin"
    )
    # Archived agents have left the catalogue, so they are not members any more.
    agents: Mapped[list[AgentRow]] = relationship(
        primaryjoin=lambda: and_(AgentRow.fleet_id == FleetRow.id, AgentRow.archived_at.is_(None)),
        viewonly=True,
        order_by=lambda: AgentRow.stable_key,
    )
    agent_count: Mapped[int] = column_property(
        select(func.count(AgentRow.id))
        .where(AgentRow.fleet_id == id, AgentRow.archived_at.is_(None))
        .correlate_except(AgentRow)
        .scalar_subquery()
    )

    @property
    def environments(self) -> list[EnvironmentRow]:
        return sorted((link.environment for link in self.environment_links), key=lambda env: env.name)


class FleetEnvironmentRow(Base):
    """An environment a fleet targets."""

    __tablename__ = "fleet_environments"

    fleet_id: Mapped[str] = mapped_column(ForeignKey("fleets.id", ondelete="CASCADE"), primary_key=True)
    environment_id: Mapped[str] = mapped_column(
        ForeignKey("environments.id", ondelete="CASCADE"), primary_key=True, index=True
    )

    environment: Mapped[EnvironmentRow] = relationship(lazy="selectin")

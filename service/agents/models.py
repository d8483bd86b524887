from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Index, Integer, String, UniqueConstraint, and_
from sqlalchemy.orm import Mapped, foreign, mapped_column, relationship

from api.agents import AgentSnapshot, content_hash
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

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, String, UniqueConstraint, and_, func, select
from sqlalchemy.orm import Mapped, column_property, mapped_column, relationship

from service.agents.models import AgentRow
from service.environments.models import EnvironmentRow
from service.storage.db import Base, UTCDateTime, utcnow
from service.storage.ids import new_id


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

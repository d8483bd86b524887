from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, ForeignKey, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from service.storage.db import Base, UTCDateTime, utcnow
from service.storage.ids import new_id


class ProviderConnectionRow(Base):
    """An organization's connection to a language-model provider, its API key encrypted."""

    __tablename__ = "llm_providers"
    __table_args__ = (UniqueConstraint("org_id", "name", name="uq_llm_providers_org_id_name"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=lambda: new_id("prov"))
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(40))
    base_url: Mapped[str] = mapped_column(String(2000))
    api_version: Mapped[str | None] = mapped_column(String(40))
    # Fernet token of the key (service.storage.crypto); the last 4 characters identify it in listings.
    api_key_encrypted: Mapped[str | None] = mapped_column(Text)
    api_key_last4: Mapped[str | None] = mapped_column(String(4))
    models: Mapped[list[str]] = mapped_column(JSON, default=list)
    default_model: Mapped[str | None] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)

    @property
    def api_key_set(self) -> bool:
        return self.api_key_encrypted is not None

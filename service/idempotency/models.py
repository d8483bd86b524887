from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from service.storage.db import Base, UTCDateTime, utcnow


class IdempotencyKeyRow(Base):
    """One caller's `Idempotency-Key`: the request it was first used for, and its answer.

    Keys are per caller (organization, caller, key), so an answer is only ever replayed to the caller
    whose request it answered: it may carry a value shown once (a new API key, a signing secret).
    Another caller sending the same key makes a request of its own, under a key of its own.

    `state` is `running` while a request holds the key (until `locked_until`), `committed` once that
    request's work has committed (marked in the same transaction) and `done` once its answer is
    stored (its body encrypted). Rows older than a day are removed by the worker.
    """

    __tablename__ = "idempotency_keys"
    __table_args__ = (Index("ix_idempotency_keys_created_at", "created_at"),)

    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"), primary_key=True)
    # Who sent the request: the API key's id today; any credential's own subject id alike.
    caller_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    # SHA-256 of the method, path, query and canonical JSON body the key was first used with.
    fingerprint: Mapped[str] = mapped_column(String(64))
    method: Mapped[str] = mapped_column(String(10))
    path: Mapped[str] = mapped_column(String(2000))
    state: Mapped[str] = mapped_column(String(16))
    # Which request holds the key: a request whose claim was taken over may no longer commit.
    claim: Mapped[str] = mapped_column(String(32))
    locked_until: Mapped[datetime] = mapped_column(UTCDateTime)
    status_code: Mapped[int | None] = mapped_column(Integer)
    response_headers: Mapped[list[Any] | None] = mapped_column(JSON)
    # Encrypted like every secret: an answer may carry one shown only once (a new API key).
    response_body_encrypted: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

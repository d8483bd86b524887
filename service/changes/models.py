from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from service.storage.db import Base, UTCDateTime, utcnow
from service.storage.ids import new_id


class ChangeRequestRow(Base):
    """A protected change waiting for, or decided by, its reviewers.

    `payload` is the direct call's body as it will be applied (a deployment's agent versions pinned
    when it was opened); `preview` is what it changes, with the state it replaces (`before`), which
    must still hold when it is applied. `environment_id` names the environment whose protection
    governs it (its `requiredApprovals`, read whenever the request is shown or decided);
    `required_approvals` is the count when it was opened, then when it was decided. `sealed` is a
    secret the change carries (a secret's value, a new signing key), encrypted as stored secrets are
    (service.storage.crypto): installed as it is when the change is applied, dropped when the request is
    decided, in no answer.
    """

    __tablename__ = "change_requests"
    __table_args__ = (Index("ix_change_requests_org_id_status_id", "org_id", "status", "id"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=lambda: new_id("chg"))
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(20))
    status: Mapped[str] = mapped_column(String(20), default="open")
    target: Mapped[str] = mapped_column(String(300))
    reason: Mapped[str] = mapped_column(String(2000))
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    preview: Mapped[dict[str, Any]] = mapped_column(JSON)
    environment_id: Mapped[str | None] = mapped_column(String(40))
    sealed: Mapped[str | None] = mapped_column(Text)
    required_approvals: Mapped[int] = mapped_column(Integer)
    requested_by_key_id: Mapped[str] = mapped_column(String(40))
    requested_by_key_name: Mapped[str] = mapped_column(String(200))
    requested_by_member_id: Mapped[str | None] = mapped_column(String(40))
    requested_by_email: Mapped[str | None] = mapped_column(String(320))
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    conflict: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    decided_at: Mapped[datetime | None] = mapped_column(UTCDateTime)

    reviews: Mapped[list[ChangeReviewRow]] = relationship(
        order_by="ChangeReviewRow.id", cascade="all, delete-orphan", passive_deletes=True, lazy="selectin"
    )


class ChangeReviewRow(Base):
    """One member's approval or rejection of a change request; a member reviews a request once.

    `not_counted_because` says why an approval did not count when its request was decided (its
    member deactivated, or no longer holding the change's role); null when it counted, and while
    the request is open (then it is counted afresh whenever the request is shown or decided)."""

    __tablename__ = "change_reviews"
    __table_args__ = (
        UniqueConstraint(
            "change_request_id", "member_id", name="uq_change_reviews_change_request_id_member_id"
        ),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    change_request_id: Mapped[str] = mapped_column(ForeignKey("change_requests.id", ondelete="CASCADE"))
    member_id: Mapped[str] = mapped_column(String(40))
    member_email: Mapped[str] = mapped_column(String(320))
    key_id: Mapped[str] = mapped_column(String(40))
    verdict: Mapped[str] = mapped_column(String(10))
    comment: Mapped[str] = mapped_column(String(2000), default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    not_counted_because: Mapped[str | None] = mapped_column(String(500))

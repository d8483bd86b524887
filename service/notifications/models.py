from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from service.storage.db import Base, UTCDateTime, utcnow
from service.storage.ids import new_id


class ChannelRow(Base):
    """Where notifications go. `secret_encrypted` holds the webhook signing secret or the Slack URL.

    After a rotation the webhook's previous secret signs too, until `previous_secret_expires_at`.
    """

    __tablename__ = "notification_channels"
    __table_args__ = (UniqueConstraint("org_id", "name", name="uq_notification_channels_org_id_name"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=lambda: new_id("ch"))
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(20))
    # What may be shown: the webhook URL, the Slack URL's host, the email recipients.
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    secret_encrypted: Mapped[str | None] = mapped_column(String(2000))
    previous_secret_encrypted: Mapped[str | None] = mapped_column(String(2000))
    previous_secret_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    disabled_reason: Mapped[str | None] = mapped_column(String(500))
    disabled_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    @property
    def state(self) -> str:
        return "disabled" if self.disabled_at else "active"


class SubscriptionRow(Base):
    __tablename__ = "notification_subscriptions"
    __table_args__ = (
        UniqueConstraint(
            "channel_id", "event_type", name="uq_notification_subscriptions_channel_id_event_type"
        ),
        Index("ix_notification_subscriptions_org_id_event_type", "org_id", "event_type"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=lambda: new_id("sub"))
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    channel_id: Mapped[str] = mapped_column(ForeignKey("notification_channels.id", ondelete="CASCADE"))
    event_type: Mapped[str] = mapped_column(String(40))
    enabled: Mapped[bool] = mapped_column(default=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class DeliveryRow(Base):
    """One event on its way to one channel. Its id is the `webhook-id`, the same on every attempt.

    `pending` (not tried yet, or queued again by a resend or a recovery) and `failed` (its last
    attempt failed, the next is scheduled) deliveries are due at `next_attempt_at`; `sent` and
    `dead` ones are done; `held` ones arrived, or were due, while their channel was disabled and
    wait to be recovered. A worker claims a due delivery by setting `lease_token` and
    `lease_expires_at`; one whose lease ran out (its worker died mid-attempt) is claimed again.
    The retry schedule counts the attempts from `schedule_from`: a resend or a recovery starts it anew.
    """

    __tablename__ = "notification_deliveries"
    __table_args__ = (
        UniqueConstraint("event_id", "channel_id", name="uq_notification_deliveries_event_id_channel_id"),
        # What workers claim: due deliveries in order, read past the channels that have no free slot.
        Index(
            "ix_notification_deliveries_status_next_attempt_at_channel_id",
            "status",
            "next_attempt_at",
            "channel_id",
        ),
        # The list, newest first: unfiltered, by channel, by state.
        Index("ix_notification_deliveries_org_id_created_at_id", "org_id", "created_at", "id"),
        Index(
            "ix_notification_deliveries_org_id_channel_id_created_at_id",
            "org_id",
            "channel_id",
            "created_at",
            "id",
        ),
        Index(
            "ix_notification_deliveries_org_id_status_created_at_id", "org_id", "status", "created_at", "id"
        ),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=lambda: new_id("msg"))
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    event_id: Mapped[str] = mapped_column(ForeignKey("events.id", ondelete="CASCADE"))
    event_type: Mapped[str] = mapped_column(String(40))
    channel_id: Mapped[str] = mapped_column(ForeignKey("notification_channels.id", ondelete="CASCADE"))
    status: Mapped[str] = mapped_column(String(20), default="pending")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    schedule_from: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_response_status: Mapped[int | None] = mapped_column(Integer)
    last_error: Mapped[str | None] = mapped_column(String(500))
    lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    lease_token: Mapped[str | None] = mapped_column(String(40))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class DeliveryLogRow(Base):
    """One delivery attempt. Plain ids, no foreign keys: the log outlives its channel.

    What went out and what came back: the request's headers (no secret is ever in them), the
    response's status, headers and first 4 KiB of its body.
    """

    __tablename__ = "notification_logs"
    __table_args__ = (
        # Both end in `id`, the order's tie-breaker: a page's ids, however deep its offset, are
        # found in an index alone, and only the page's own rows are then read.
        Index(
            "ix_notification_logs_org_id_channel_id_status_created_at_id",
            "org_id",
            "channel_id",
            "status",
            "created_at",
            "id",
        ),
        Index("ix_notification_logs_org_id_created_at_id", "org_id", "created_at", "id"),
        # A delivery's attempts, for its detail.
        Index("ix_notification_logs_delivery_id_attempt", "delivery_id", "attempt"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True, default=lambda: new_id("log"))
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    delivery_id: Mapped[str] = mapped_column(String(40))
    event_id: Mapped[str] = mapped_column(String(40))
    event_type: Mapped[str] = mapped_column(String(40))
    channel_id: Mapped[str] = mapped_column(String(40))
    channel_name: Mapped[str] = mapped_column(String(200))
    channel_kind: Mapped[str] = mapped_column(String(20))
    attempt: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(20))
    response_status: Mapped[int | None] = mapped_column(Integer)
    latency_ms: Mapped[int | None] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(String(500))
    next_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    request_headers: Mapped[dict[str, str] | None] = mapped_column(JSON)
    response_headers: Mapped[dict[str, str] | None] = mapped_column(JSON)
    response_body: Mapped[str | None] = mapped_column(Text)


class LogCounts:
    """What the log's counts are kept by, besides their period: how many attempts an organization's
    log holds per channel, event type and outcome."""

    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"), primary_key=True)
    channel_id: Mapped[str] = mapped_column(String(40), primary_key=True)
    event_type: Mapped[str] = mapped_column(String(40), primary_key=True)
    status: Mapped[str] = mapped_column(String(20), primary_key=True)
    attempts: Mapped[int] = mapped_column(Integer)


class DeliveryLogCountRow(LogCounts, Base):
    """The log's counts per UTC hour.

    The `total` of a log query is summed from these rows for the whole hours it covers (and from
    the day counts for the whole days among them), instead of counting every matching attempt.
    Triggers on notification_logs (migration 0012) keep it, so every writer, bulk loads included,
    keeps it exact.
    """

    __tablename__ = "notification_log_counts"
    __table_args__ = (
        Index(
            "ix_notification_log_counts_org_id_channel_id_status_hour",
            "org_id",
            "channel_id",
            "status",
            "hour",
            "event_type",
            "attempts",
        ),
    )

    hour: Mapped[datetime] = mapped_column(UTCDateTime, primary_key=True)


class DeliveryLogDayCountRow(LogCounts, Base):
    """The log's counts per UTC day (`day` is its midnight), kept by triggers of their own
    (migration 0024): a week's whole days read 7 rows per key instead of 168."""

    __tablename__ = "notification_log_day_counts"
    __table_args__ = (
        Index(
            "ix_notification_log_day_counts_org_id_channel_id_status_day",
            "org_id",
            "channel_id",
            "status",
            "day",
            "event_type",
            "attempts",
        ),
    )

    day: Mapped[datetime] = mapped_column(UTCDateTime, primary_key=True)

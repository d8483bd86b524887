"""Wire models of notifications: channels, subscriptions of event types to channels, delivery logs."""

from __future__ import annotations

import re
from datetime import date, datetime
from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BeforeValidator, Field, model_validator

from api.common import (
    DEFAULT_PAGE_SIZE,
    EmailAddress,
    Name,
    OrgScoped,
    OrgSlug,
    Page,
    PageLimit,
    PageOffset,
    QueryParameters,
    Record,
    Request,
    Timestamp,
    Trimmed,
)
from api.events import EventType
from api.resource import Resource, body

ChannelKind = Literal["webhook", "slack", "email"]
ChannelState = Literal["active", "disabled"]
LogStatus = Literal["sent", "failed", "dead"]
LOG_STATUSES: tuple[str, ...] = ("sent", "failed", "dead")
# GET /notifications/logs/stats covers the last `days` UTC days, today included.
STATS_DEFAULT_DAYS = 30
STATS_MAX_DAYS = 365

Url = Trimmed(2000)


class ChannelConfigInput(Request):
    """Where a channel delivers: `url` for webhook and slack channels, `recipients` for email."""

    url: Url | None = None
    recipients: list[EmailAddress] | None = Field(None, min_length=1, max_length=50)


class CreateChannel(OrgScoped):
    name: Name
    kind: ChannelKind
    config: ChannelConfigInput


class Channel(Record):
    """A channel as listings show it: a Slack URL only by its host, never a signing secret."""

    id: str
    name: str
    kind: ChannelKind
    config: dict[str, Any]
    state: ChannelState
    disabled_reason: str | None = None
    disabled_at: Timestamp | None = None
    created_at: Timestamp


class CreatedChannel(Channel):
    """The answer to a create: the only time a webhook channel's `whsec_` signing secret is shown."""

    signing_secret: str | None = None


class ChannelTestRequest(OrgScoped):
    event_type: EventType = "deployment.complete"


class Delivery(Record):
    """One event on its way to one channel; its attempts are in the logs."""

    id: str
    event_id: str
    event_type: EventType
    channel_id: str
    status: Literal["pending", "sent", "dead"]
    next_attempt_at: Timestamp | None = None


class Subscribe(OrgScoped):
    channel_id: str = Field(min_length=1, max_length=40)
    event_type: EventType
    enabled: bool = True


class Unsubscribe(OrgScoped):
    channel_id: str = Field(min_length=1, max_length=40)
    event_type: EventType


class Subscription(Record):
    id: str
    channel_id: str
    event_type: EventType
    enabled: bool
    created_at: Timestamp
    updated_at: Timestamp


RFC3339_START = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}")


def _rfc3339(value: Any) -> Any:
    # Lax parsing would read "6" as six seconds after 1970: a typo, not a moment anyone means.
    if isinstance(value, str) and not RFC3339_START.match(value):
        raise ValueError("must be an RFC 3339 date-time with its offset, e.g. 2026-11-24T09:30:00Z")
    return value


Moment = Annotated[AwareDatetime, BeforeValidator(_rfc3339)]


class DateRange(QueryParameters):
    """From `start` (inclusive) to `end` (exclusive); either may be left out."""

    start: Moment | None = None
    end: Moment | None = None

    @model_validator(mode="after")
    def _start_before_end(self) -> DateRange:
        if self.start and self.end and self.start >= self.end:
            raise ValueError("start must be before end")
        return self


class Pagination(QueryParameters):
    limit: PageLimit = DEFAULT_PAGE_SIZE
    offset: PageOffset = 0


class LogQuery(QueryParameters):
    """The filters of GET /notifications/logs, whichever query encoding carried them."""

    org_slug: OrgSlug
    event_type: EventType | None = None
    channel_id: str | None = Field(None, max_length=40)
    status: list[LogStatus] | None = Field(None, min_length=1)
    date_range: DateRange = DateRange()
    pagination: Pagination = Pagination()
    cursor: str | None = Field(None, max_length=200, description="A `nextCursor` from a previous page.")

    @model_validator(mode="after")
    def _cursor_or_offset(self) -> LogQuery:
        if self.cursor and self.pagination.offset:
            raise ValueError("give either cursor or pagination.offset, not both")
        return self


class LogEntry(Record):
    """One delivery attempt."""

    id: str
    delivery_id: str
    event_id: str
    event_type: EventType
    channel_id: str
    channel_name: str
    channel_kind: ChannelKind
    attempt: int
    status: LogStatus
    response_status: int | None = None
    latency_ms: int | None = None
    error: str | None = None
    next_attempt_at: Timestamp | None = None
    created_at: Timestamp


class StatusCounts(Record):
    """Delivery attempts by outcome."""

    sent: int
    failed: int
    dead: int


class DayCounts(StatusCounts):
    """The attempts of one UTC day."""

    day: date


class ChannelCounts(StatusCounts):
    """The attempts to one channel, a deleted one included (its log outlives it)."""

    channel_id: str
    channel_name: str
    channel_kind: ChannelKind
    failure_rate: float = Field(description="The share of attempts that failed or were dead, 0..1.")


class LogStats(Record):
    """Counts of delivery attempts from `start` (midnight UTC, `days` days ago including today)."""

    days: int
    start: Timestamp
    per_day: list[DayCounts] = Field(description="Every day of the period, oldest first, zeros included.")
    per_channel: list[ChannelCounts] = Field(description="Channels with attempts, most attempts first.")


class NotificationsResource(Resource):
    def create_channel(
        self,
        name: str,
        kind: str,
        *,
        url: str | None = None,
        recipients: list[str] | None = None,
        org_slug: str | None = None,
    ) -> CreatedChannel:
        given = {"url": url, "recipients": recipients}
        config = ChannelConfigInput.model_construct(**{k: v for k, v in given.items() if v is not None})
        payload = body(CreateChannel, org_slug=self._org(org_slug), name=name, kind=kind, config=config)
        answer = self._client.request("POST", "/notifications/channels", json=payload)
        return CreatedChannel.model_validate(answer)

    def list_channels(self, *, org_slug: str | None = None) -> Page[Channel]:
        params = {"orgSlug": self._org(org_slug)}
        return Page[Channel].model_validate(
            self._client.request("GET", "/notifications/channels", params=params)
        )

    def delete_channel(self, channel_id: str, *, org_slug: str | None = None) -> Channel:
        params = {"orgSlug": self._org(org_slug)}
        answer = self._client.request("DELETE", f"/notifications/channels/{channel_id}", params=params)
        return Channel.model_validate(answer)

    def test_channel(
        self, channel_id: str, *, event_type: str | None = None, org_slug: str | None = None
    ) -> Delivery:
        payload = body(ChannelTestRequest, org_slug=self._org(org_slug), event_type=event_type)
        answer = self._client.request("POST", f"/notifications/channels/{channel_id}/test", json=payload)
        return Delivery.model_validate(answer)

    def subscribe(
        self, channel_id: str, event_type: str, *, enabled: bool = True, org_slug: str | None = None
    ) -> Subscription:
        payload = body(
            Subscribe,
            org_slug=self._org(org_slug),
            channel_id=channel_id,
            event_type=event_type,
            enabled=enabled,
        )
        answer = self._client.request("POST", "/notifications/subscriptions/subscribe", json=payload)
        return Subscription.model_validate(answer)

    def unsubscribe(self, channel_id: str, event_type: str, *, org_slug: str | None = None) -> Subscription:
        payload = body(
            Unsubscribe, org_slug=self._org(org_slug), channel_id=channel_id, event_type=event_type
        )
        answer = self._client.request("POST", "/notifications/subscriptions/unsubscribe", json=payload)
        return Subscription.model_validate(answer)

    def list_subscriptions(
        self, *, channel_id: str | None = None, org_slug: str | None = None
    ) -> Page[Subscription]:
        params = {"orgSlug": self._org(org_slug), "channelId": channel_id}
        answer = self._client.request("GET", "/notifications/subscriptions", params=params)
        return Page[Subscription].model_validate(answer)

    def logs(
        self,
        *,
        event_type: str | None = None,
        channel_id: str | None = None,
        status: list[str] | None = None,
        start: datetime | None = None,
        end: datetime | None = None,
        limit: int | None = None,
        offset: int | None = None,
        cursor: str | None = None,
        org_slug: str | None = None,
    ) -> Page[LogEntry]:
        """Delivery attempts, newest first; object parameters are sent in deepObject form."""
        params: dict[str, Any] = {
            "orgSlug": self._org(org_slug),
            "eventType": event_type,
            "channelId": channel_id,
            "status": ",".join(status) if status else None,
            "dateRange[start]": start.isoformat() if start else None,
            "dateRange[end]": end.isoformat() if end else None,
            "pagination[limit]": limit,
            "pagination[offset]": offset,
            "cursor": cursor,
        }
        answer = self._client.request("GET", "/notifications/logs", params=params)
        return Page[LogEntry].model_validate(answer)

    def log_stats(self, *, days: int | None = None, org_slug: str | None = None) -> LogStats:
        """Attempts per day and per channel over the last `days` days (default 30, at most 365)."""
        params = {"orgSlug": self._org(org_slug), "days": days}
        answer = self._client.request("GET", "/notifications/logs/stats", params=params)
        return LogStats.model_validate(answer)

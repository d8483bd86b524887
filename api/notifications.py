"""Wire models of notifications: channels, subscriptions of event types to channels, deliveries
(one per event and channel, with every attempt) and the log of attempts."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any, Literal, get_args

from pydantic import Field, model_validator

from api.common import (
    DEFAULT_PAGE_SIZE,
    EmailAddress,
    Moment,
    Name,
    OrgScoped,
    OrgSlug,
    Page,
    PageLimit,
    PageOffset,
    Patch,
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
LOG_STATUSES: tuple[str, ...] = get_args(LogStatus)
# pending: not tried yet (or queued again); failed: its last attempt failed, a retry is scheduled;
# sent; dead: every retry failed (or the address is refused); held: its channel is disabled.
DeliveryStatus = Literal["pending", "failed", "sent", "dead", "held"]
DELIVERY_STATUSES: tuple[str, ...] = get_args(DeliveryStatus)
# The first bytes of a receiver's answer kept with each attempt.
RESPONSE_BODY_BYTES = 4096
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
    previous_secret_expires_at: Timestamp | None = Field(
        None, description="After a rotation, until when deliveries are signed with the previous secret too."
    )
    created_at: Timestamp


class CreatedChannel(Channel):
    """The answer to a create or a secret rotation: the only time a webhook channel's `whsec_`
    signing secret is shown."""

    signing_secret: str | None = None


class UpdateChannel(OrgScoped):
    """A channel's changes: only the fields sent change. Disabling holds its deliveries."""

    name: Patch[Name] = None
    enabled: Patch[bool] = None
    config: Patch[ChannelConfigInput] = Field(
        None, description="A new address of the same kind; a webhook keeps its signing secret."
    )


class ChannelTestRequest(OrgScoped):
    event_type: EventType = "deployment.complete"


class RecoverRequest(OrgScoped):
    """Send again the channel's failed, dead and held deliveries made from `since` (until `until`)."""

    since: Moment
    until: Moment | None = None

    @model_validator(mode="after")
    def _since_before_until(self) -> RecoverRequest:
        if self.until and self.since >= self.until:
            raise ValueError("since must be before until")
        return self


class Recovered(Record):
    channel_id: str
    since: Timestamp
    until: Timestamp | None = None
    recovered: int = Field(description="How many deliveries were queued again.")


class Delivery(Record):
    """One event on its way to one channel: the message a receiver deduplicates by its `webhook-id`."""

    id: str = Field(description="The message id, sent as `webhook-id` on every attempt.")
    event_id: str
    event_type: EventType
    channel_id: str
    channel_name: str
    channel_kind: ChannelKind
    status: DeliveryStatus
    attempts: int
    created_at: Timestamp
    last_attempt_at: Timestamp | None = None
    next_attempt_at: Timestamp | None = None
    last_response_status: int | None = None
    last_error: str | None = None


class DeliveryEvent(Record):
    """The event delivered, as it was recorded."""

    id: str
    type: EventType
    occurred_at: Timestamp
    payload: dict[str, Any]


class DeliveryRequest(Record):
    """What every attempt sends: where to, and the body (the same on every attempt)."""

    method: Literal["POST", "SMTP"]
    destination: str = Field(description="The webhook URL, a Slack URL's host, or the email recipients.")
    content_type: str
    body: str


class DeliveryAttempt(Record):
    """One attempt: the request's headers (never a secret) and the receiver's answer."""

    id: str
    attempt: int
    status: LogStatus
    created_at: Timestamp
    latency_ms: int | None = None
    error: str | None = None
    next_attempt_at: Timestamp | None = None
    request_headers: dict[str, str] = {}
    response_status: int | None = None
    response_headers: dict[str, str] = {}
    response_body: str | None = Field(None, description="The first 4 KiB of the answer's body.")


class DeliveryDetail(Delivery):
    event: DeliveryEvent
    request: DeliveryRequest
    attempt_log: list[DeliveryAttempt] = Field(description="Every attempt, oldest first.")


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


class PagedQuery(QueryParameters):
    """Filters and paging shared by the log and the deliveries, whichever query encoding carried them."""

    org_slug: OrgSlug
    event_type: EventType | None = None
    channel_id: str | None = Field(None, max_length=40)
    date_range: DateRange = DateRange()
    pagination: Pagination = Pagination()
    cursor: str | None = Field(None, max_length=200, description="A `nextCursor` from a previous page.")

    @model_validator(mode="after")
    def _cursor_or_offset(self) -> PagedQuery:
        if self.cursor and self.pagination.offset:
            raise ValueError("give either cursor or pagination.offset, not both")
        return self


class LogQuery(PagedQuery):
    """The filters of GET /notifications/logs."""

    status: list[LogStatus] | None = Field(None, min_length=1)


class DeliveryQuery(PagedQuery):
    """The filters of GET /notifications/deliveries; `dateRange` bounds when they were made."""

    event_id: str | None = Field(None, max_length=40)
    status: list[DeliveryStatus] | None = Field(None, min_length=1)


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

    def update_channel(
        self,
        channel_id: str,
        *,
        name: str | None = None,
        enabled: bool | None = None,
        url: str | None = None,
        recipients: list[str] | None = None,
        org_slug: str | None = None,
    ) -> Channel:
        """Rename, enable or disable a channel, or give it a new address; None leaves a field as it is."""
        given = {"url": url, "recipients": recipients}
        config = {k: v for k, v in given.items() if v is not None}
        payload = body(
            UpdateChannel,
            org_slug=self._org(org_slug),
            name=name,
            enabled=enabled,
            config=ChannelConfigInput.model_construct(**config) if config else None,
        )
        answer = self._client.request("PATCH", f"/notifications/channels/{channel_id}", json=payload)
        return Channel.model_validate(answer)

    def rotate_secret(self, channel_id: str, *, org_slug: str | None = None) -> CreatedChannel:
        """A new signing secret for a webhook channel, shown in this answer only."""
        payload = body(OrgScoped, org_slug=self._org(org_slug))
        path = f"/notifications/channels/{channel_id}/rotate-secret"
        return CreatedChannel.model_validate(self._client.request("POST", path, json=payload))

    def recover(
        self,
        channel_id: str,
        since: datetime,
        *,
        until: datetime | None = None,
        org_slug: str | None = None,
    ) -> Recovered:
        """Queue again the channel's failed, dead and held deliveries made since `since`."""
        payload = body(RecoverRequest, org_slug=self._org(org_slug), since=since, until=until)
        path = f"/notifications/channels/{channel_id}/recover"
        return Recovered.model_validate(self._client.request("POST", path, json=payload))

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

    def deliveries(
        self,
        *,
        event_type: str | None = None,
        channel_id: str | None = None,
        event_id: str | None = None,
        status: list[str] | None = None,
        start: datetime | None = None,
        end: datetime | None = None,
        limit: int | None = None,
        offset: int | None = None,
        cursor: str | None = None,
        org_slug: str | None = None,
    ) -> Page[Delivery]:
        """Deliveries (one per event and channel), newest first, in the log's query form."""
        params: dict[str, Any] = {
            "orgSlug": self._org(org_slug),
            "eventType": event_type,
            "channelId": channel_id,
            "eventId": event_id,
            "status": ",".join(status) if status else None,
            "dateRange[start]": start.isoformat() if start else None,
            "dateRange[end]": end.isoformat() if end else None,
            "pagination[limit]": limit,
            "pagination[offset]": offset,
            "cursor": cursor,
        }
        answer = self._client.request("GET", "/notifications/deliveries", params=params)
        return Page[Delivery].model_validate(answer)

    def delivery(self, delivery_id: str, *, org_slug: str | None = None) -> DeliveryDetail:
        """One delivery with its event, what is sent and every attempt with the answer to it."""
        params = {"orgSlug": self._org(org_slug)}
        answer = self._client.request("GET", f"/notifications/deliveries/{delivery_id}", params=params)
        return DeliveryDetail.model_validate(answer)

    def resend(self, delivery_id: str, *, org_slug: str | None = None) -> Delivery:
        """Queue an attempt now, whatever the delivery's state, with a new round of retries."""
        payload = body(OrgScoped, org_slug=self._org(org_slug))
        path = f"/notifications/deliveries/{delivery_id}/resend"
        return Delivery.model_validate(self._client.request("POST", path, json=payload))

    def log_stats(self, *, days: int | None = None, org_slug: str | None = None) -> LogStats:
        """Attempts per day and per channel over the last `days` days (default 30, at most 365)."""
        params = {"orgSlug": self._org(org_slug), "days": days}
        answer = self._client.request("GET", "/notifications/logs/stats", params=params)
        return LogStats.model_validate(answer)

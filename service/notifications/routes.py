from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query, Request, Response

from api.common import OrgScoped, Page
from api.notifications import (
    STATS_DEFAULT_DAYS,
    STATS_MAX_DAYS,
    Channel,
    ChannelTestRequest,
    CreateChannel,
    CreatedChannel,
    Delivery,
    DeliveryDetail,
    DeliveryQuery,
    LogEntry,
    LogQuery,
    LogStats,
    Recovered,
    RecoverRequest,
    Subscribe,
    Subscription,
    Unsubscribe,
    UpdateChannel,
)
from service.http.deps import AppSettings, Operator, OrgSlugQuery, ReadSession, Viewer, WriteSession
from service.http.query import parse_query
from service.http.responses import rendered_json, splice_json
from service.http.routing import api_router
from service.notifications import deliveries, logs, service
from service.notifications.query import (
    DELIVERIES_QUERY_OPENAPI,
    DELIVERY_SCALARS,
    LOGS_QUERY_OPENAPI,
    SCALARS,
)
from service.storage.crypto import cipher_for

router = api_router("/notifications", tags=["Notifications"])
DeliveryIdPath = Annotated[str, Path(alias="deliveryId", description="The delivery's id.")]
ChannelIdPath = Annotated[str, Path(alias="channelId", description="The channel's id.")]


@router.post("/channels", response_model=CreatedChannel)
def create_channel(
    body: CreateChannel, caller: Operator, session: WriteSession, settings: AppSettings
) -> CreatedChannel:
    """Create a channel. A webhook channel's `whsec_` signing secret is in this answer only."""
    created = service.create_channel(
        session, org_id=caller.org_id_for(body.org_slug), request=body, cipher=cipher_for(settings)
    )
    shown = Channel.model_validate(created.record).model_dump()
    return CreatedChannel.model_validate({**shown, "signing_secret": created.signing_secret})


@router.get("/channels", response_model=Page[Channel])
def list_channels(org_slug: OrgSlugQuery, caller: Viewer, session: ReadSession) -> Page[Channel]:
    """The organization's channels with their state; never a secret."""
    channels = service.list_channels(session, org_id=caller.org_id_for(org_slug))
    return Page[Channel](items=[Channel.model_validate(c) for c in channels], total=len(channels))


@router.patch("/channels/{channelId}", response_model=Channel)
def update_channel(
    channel_id: ChannelIdPath,
    body: UpdateChannel,
    caller: Operator,
    session: WriteSession,
    settings: AppSettings,
) -> Channel:
    """Rename a channel, give it a new address, or enable or disable it. A disabled channel holds
    its deliveries (state `held`) until it is enabled and they are recovered."""
    channel = service.update_channel(
        session,
        org_id=caller.org_id_for(body.org_slug),
        channel_id=channel_id,
        request=body,
        actor=f"key '{caller.key_name}'",
        cipher=cipher_for(settings),
    )
    return Channel.model_validate(channel)


@router.post("/channels/{channelId}/rotate-secret", response_model=CreatedChannel)
def rotate_secret(
    channel_id: ChannelIdPath, body: OrgScoped, caller: Operator, session: WriteSession, settings: AppSettings
) -> CreatedChannel:
    """A new `whsec_` signing secret for a webhook channel, in this answer only. Until
    `previousSecretExpiresAt` every delivery is signed with both secrets."""
    channel, secret = service.rotate_secret(
        session,
        org_id=caller.org_id_for(body.org_slug),
        channel_id=channel_id,
        cipher=cipher_for(settings),
        grace_seconds=settings.notification_secret_grace_seconds,
    )
    return CreatedChannel.model_validate(
        {**Channel.model_validate(channel).model_dump(), "signing_secret": secret}
    )


@router.post("/channels/{channelId}/recover", response_model=Recovered)
def recover(
    channel_id: ChannelIdPath, body: RecoverRequest, caller: Operator, session: WriteSession
) -> Recovered:
    """Queue again, now, the channel's `failed`, `dead` and `held` deliveries made since `since`."""
    count = deliveries.recover(
        session, org_id=caller.org_id_for(body.org_slug), channel_id=channel_id, request=body
    )
    return Recovered(channel_id=channel_id, since=body.since, until=body.until, recovered=count)


@router.delete("/channels/{channelId}", response_model=Channel)
def delete_channel(
    channel_id: ChannelIdPath, org_slug: OrgSlugQuery, caller: Operator, session: WriteSession
) -> Channel:
    """Delete a channel and its subscriptions. Its delivery logs are kept."""
    channel = service.delete_channel(session, org_id=caller.org_id_for(org_slug), channel_id=channel_id)
    return Channel.model_validate(channel)


@router.post("/channels/{channelId}/test", response_model=Delivery)
def test_channel(
    channel_id: ChannelIdPath, body: ChannelTestRequest, caller: Operator, session: WriteSession
) -> Delivery:
    """Queue a test event for this channel alone; it is sent like any other (see the logs)."""
    delivery = service.send_test(
        session, org_id=caller.org_id_for(body.org_slug), channel_id=channel_id, request=body
    )
    return deliveries.delivery_record(session, delivery)


@router.get("/deliveries", response_model=Page[Delivery], openapi_extra=DELIVERIES_QUERY_OPENAPI)
def list_deliveries(request: Request, caller: Viewer, session: ReadSession) -> Page[Delivery]:
    """Deliveries (one per event and channel), newest first; `total` counts every match."""
    query = parse_query(request, DeliveryQuery, DELIVERY_SCALARS)
    page = deliveries.list_deliveries(session, org_id=caller.org_id_for(query.org_slug), query=query)
    return Page[Delivery](
        items=page.items,
        limit=query.pagination.limit,
        offset=query.pagination.offset,
        total=page.total,
        next_cursor=page.next_cursor,
    )


@router.get("/deliveries/{deliveryId}", response_model=DeliveryDetail)
def get_delivery(
    delivery_id: DeliveryIdPath,
    org_slug: OrgSlugQuery,
    caller: Viewer,
    session: ReadSession,
    settings: AppSettings,
) -> DeliveryDetail:
    """A delivery with its event, the body every attempt sends, and each attempt: the request's
    headers (never a secret), the answer's status, headers and first 4 KiB, latency and error."""
    return deliveries.get_delivery(
        session, org_id=caller.org_id_for(org_slug), delivery_id=delivery_id, settings=settings
    )


@router.post("/deliveries/{deliveryId}/resend", response_model=Delivery)
def resend(delivery_id: DeliveryIdPath, body: OrgScoped, caller: Operator, session: WriteSession) -> Delivery:
    """Queue an attempt now, whatever the delivery's state, with a new round of retries after it.
    The message keeps its `webhook-id`."""
    delivery = deliveries.resend(session, org_id=caller.org_id_for(body.org_slug), delivery_id=delivery_id)
    return deliveries.delivery_record(session, delivery)


@router.post("/subscriptions/subscribe", response_model=Subscription)
def subscribe(body: Subscribe, caller: Operator, session: WriteSession) -> Subscription:
    """Subscribe a channel to one event type; subscribing again sets `enabled`."""
    subscription = service.subscribe(session, org_id=caller.org_id_for(body.org_slug), request=body)
    return Subscription.model_validate(subscription)


@router.post("/subscriptions/unsubscribe", response_model=Subscription)
def unsubscribe(body: Unsubscribe, caller: Operator, session: WriteSession) -> Subscription:
    """Remove a channel's subscription to one event type; answers with the removed subscription."""
    subscription = service.unsubscribe(session, org_id=caller.org_id_for(body.org_slug), request=body)
    return Subscription.model_validate(subscription)


@router.get("/subscriptions", response_model=Page[Subscription])
def list_subscriptions(
    org_slug: OrgSlugQuery,
    caller: Viewer,
    session: ReadSession,
    channel_id: Annotated[str | None, Query(alias="channelId", max_length=40)] = None,
) -> Page[Subscription]:
    """The organization's subscriptions, optionally of one channel."""
    subscriptions = service.list_subscriptions(
        session, org_id=caller.org_id_for(org_slug), channel_id=channel_id
    )
    return Page[Subscription](
        items=[Subscription.model_validate(s) for s in subscriptions], total=len(subscriptions)
    )


@router.get("/logs", response_model=Page[LogEntry], openapi_extra=LOGS_QUERY_OPENAPI)
def list_logs(request: Request, caller: Viewer, session: ReadSession) -> Response:
    """Delivery attempts, newest first, filtered; `total` counts every match, `nextCursor` walks on."""
    query = parse_query(request, LogQuery, SCALARS)
    page = logs.list_logs(session, org_id=caller.org_id_for(query.org_slug), query=query)
    frame = Page[LogEntry](
        items=[],
        limit=query.pagination.limit,
        offset=query.pagination.offset,
        total=page.total,
        next_cursor=page.next_cursor,
    )
    return rendered_json(splice_json(frame, items=f"[{','.join(page.entries)}]"))


@router.get("/logs/stats", response_model=LogStats)
def log_stats(
    org_slug: OrgSlugQuery,
    caller: Viewer,
    session: ReadSession,
    days: Annotated[
        int,
        Query(ge=1, le=STATS_MAX_DAYS, description="The last N UTC days, today included (1..365)."),
    ] = STATS_DEFAULT_DAYS,
) -> LogStats:
    """Delivery attempts per day and per channel, by outcome: the log's charts, counted in the database."""
    return logs.log_stats(session, org_id=caller.org_id_for(org_slug), days=days)

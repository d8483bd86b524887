"""The query strings of GET /notifications/logs and /notifications/deliveries (read by service.http.query)."""

from __future__ import annotations

from typing import Any

from api.events import EVENT_TYPES
from api.notifications import DELIVERY_STATUSES, LOG_STATUSES
from service.http.query import paged_query_openapi, parameter

SCALARS = ("orgSlug", "eventType", "channelId", "cursor")
# The deliveries are filtered by their event too.
DELIVERY_SCALARS = (*SCALARS, "eventId")


def _filters(things: str, statuses: tuple[str, ...], extra: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        parameter(
            "eventType", f"Only {things} for this event type.", {"type": "string", "enum": list(EVENT_TYPES)}
        ),
        parameter("channelId", f"Only {things} to this channel.", {"type": "string"}),
        *extra,
        parameter(
            "status",
            f"Only {things} in these states; repeat the parameter or separate values with commas.",
            {"type": "array", "items": {"type": "string", "enum": list(statuses)}},
            style="form",
            explode=True,
        ),
    ]


LOGS_QUERY_OPENAPI = paged_query_openapi("attempts", _filters("attempts", LOG_STATUSES, []))
DELIVERIES_QUERY_OPENAPI = paged_query_openapi(
    "deliveries",
    _filters(
        "deliveries",
        DELIVERY_STATUSES,
        [parameter("eventId", "Only the deliveries of this event.", {"type": "string"})],
    ),
)

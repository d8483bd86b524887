"""The query strings of GET /notifications/logs and /deliveries, in each encoding clients use for
object parameters.

`dateRange` and `pagination` are objects. Clients send them in deepObject form
(`dateRange[start]=…&pagination[limit]=…`, what OpenAPI generators produce), dotted form
(`dateRange.start=…`) or flattened (`start=…&end=…&limit=…&offset=…`). `status` is an array, sent
repeated (`status=sent&status=dead`) or comma-separated (`status=sent,dead`). All become one
nested object for LogQuery (or DeliveryQuery) to validate; a member given twice, in any forms, is
refused.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from api.common import DEFAULT_PAGE_SIZE, MAX_INT32, MAX_PAGE_SIZE
from api.events import EVENT_TYPES
from api.notifications import DELIVERY_STATUSES, LOG_STATUSES

SCALARS = ("orgSlug", "eventType", "channelId", "cursor")
LOG_QUERY_LISTS = ("status",)
# The deliveries are filtered by their event too.
DELIVERY_SCALARS = (*SCALARS, "eventId")
OBJECTS = {"dateRange": ("start", "end"), "pagination": ("limit", "offset")}
FLATTENED = {member: parent for parent, members in OBJECTS.items() for member in members}
_MEMBER = re.compile(r"^(?P<parent>\w+)(?:\[(?P<bracket>\w+)\]|\.(?P<dot>\w+))$")


class QueryEncodingError(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message

    def as_error(self) -> dict[str, Any]:
        """In the shape of a pydantic error, so it is answered like every other invalid field."""
        return {"type": "query_encoding", "loc": ("query", *self.field.split(".")), "msg": self.message}


def query_fields(items: Iterable[tuple[str, str]], scalars: tuple[str, ...] = SCALARS) -> dict[str, Any]:
    """The query string as the query model's wire fields: {"dateRange": {"start": …}, "status": […], …}."""
    fields: dict[str, Any] = {}
    statuses: list[str] = []
    for key, value in items:
        if key in LOG_QUERY_LISTS:
            statuses.extend(part.strip() for part in value.split(",") if part.strip())
            continue
        target, member = _location(key, scalars)
        holder = fields.setdefault(target, {}) if member else fields
        name = member or target
        if name in holder:
            raise QueryEncodingError(
                _dotted(target, member), "is given more than once (in one form or several)"
            )
        holder[name] = value
    if statuses:
        fields["status"] = statuses
    return fields


def _location(key: str, scalars: tuple[str, ...]) -> tuple[str, str | None]:
    """Where a query key goes: (field, None) for a scalar, (object, member) for an object's member."""
    if key in scalars:
        return key, None
    if key in FLATTENED:
        return FLATTENED[key], key
    match = _MEMBER.match(key)
    if match:
        parent, member = match["parent"], match["bracket"] or match["dot"]
        if parent in OBJECTS and member in OBJECTS[parent]:
            return parent, member
        if parent in OBJECTS:
            raise QueryEncodingError(
                key, f"is not a member of {parent} (members: {', '.join(OBJECTS[parent])})"
            )
    raise QueryEncodingError(key, "is not a query parameter of this endpoint")


def _dotted(target: str, member: str | None) -> str:
    return f"{target}.{member}" if member else target


def _parameter(name: str, description: str, schema: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "description": description,
        "schema": schema,
        **extra,
    }


_DATE_TIME = {"type": "string", "format": "date-time"}
_LIMIT = {"type": "integer", "minimum": 1, "maximum": MAX_PAGE_SIZE, "default": DEFAULT_PAGE_SIZE}
_OFFSET = {"type": "integer", "minimum": 0, "maximum": MAX_INT32, "default": 0}
_ENCODINGS = (
    " Also accepted in dotted form (`{name}.member=…`) and flattened (`{members}`); a member given "
    "in two forms is refused with 400."
)


def _query_openapi(things: str, statuses: tuple[str, ...], extra: list[dict[str, Any]]) -> dict[str, Any]:
    """The parameters of a paged query over `things` whose states are `statuses`."""
    return {
        "parameters": [
            _parameter("orgSlug", "The organization the request acts on.", {"type": "string"}, required=True),
            _parameter(
                "eventType",
                f"Only {things} for this event type.",
                {"type": "string", "enum": list(EVENT_TYPES)},
            ),
            _parameter("channelId", f"Only {things} to this channel.", {"type": "string"}),
            *extra,
            _parameter(
                "status",
                f"Only {things} in these states; repeat the parameter or separate values with commas.",
                {"type": "array", "items": {"type": "string", "enum": list(statuses)}},
                style="form",
                explode=True,
            ),
            _parameter(
                "dateRange",
                f"{things.capitalize()} from `start` (inclusive) to `end` (exclusive), RFC 3339 with a time "
                "zone, e.g. `dateRange[start]=2026-01-01T00:00:00Z`."
                + _ENCODINGS.format(name="dateRange", members="start=…&end=…"),
                {"type": "object", "properties": {"start": _DATE_TIME, "end": _DATE_TIME}},
                style="deepObject",
                explode=True,
            ),
            _parameter(
                "pagination",
                "`limit` 1..1000 (default 50) and `offset` ≥ 0 (default 0), e.g. `pagination[limit]=100`."
                + _ENCODINGS.format(name="pagination", members="limit=…&offset=…"),
                {"type": "object", "properties": {"limit": _LIMIT, "offset": _OFFSET}},
                style="deepObject",
                explode=True,
            ),
            _parameter("start", "Flattened form of `dateRange[start]`.", _DATE_TIME),
            _parameter("end", "Flattened form of `dateRange[end]`.", _DATE_TIME),
            _parameter("limit", "Flattened form of `pagination[limit]`.", _LIMIT),
            _parameter("offset", "Flattened form of `pagination[offset]`.", _OFFSET),
            _parameter(
                "cursor",
                "The `nextCursor` of the previous page: walks every match without deep offsets "
                "(not combined with an offset).",
                {"type": "string"},
            ),
        ]
    }


LOGS_QUERY_OPENAPI = _query_openapi("attempts", LOG_STATUSES, [])
DELIVERIES_QUERY_OPENAPI = _query_openapi(
    "deliveries",
    DELIVERY_STATUSES,
    [_parameter("eventId", "Only the deliveries of this event.", {"type": "string"})],
)

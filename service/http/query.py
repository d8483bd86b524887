"""Paged, filtered query strings with object-valued parameters, in each encoding clients use.

`dateRange` and `pagination` are objects. Clients send them in deepObject form
(`dateRange[start]=…&pagination[limit]=…`, what OpenAPI generators produce), dotted form
(`dateRange.start=…`) or flattened (`start=…&end=…&limit=…&offset=…`). `status` is an array, sent
repeated (`status=sent&status=dead`) or comma-separated (`status=sent,dead`). All become one nested
object for the route's query model to validate; a member given twice, in any forms, is refused.
Used by the notification log, the deliveries and the audit trail.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, TypeVar

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError

from api.common import DEFAULT_PAGE_SIZE, MAX_INT32, MAX_PAGE_SIZE

LISTS = ("status",)
OBJECTS = {"dateRange": ("start", "end"), "pagination": ("limit", "offset")}
FLATTENED = {member: parent for parent, members in OBJECTS.items() for member in members}
_MEMBER = re.compile(r"^(?P<parent>\w+)(?:\[(?P<bracket>\w+)\]|\.(?P<dot>\w+))$")
Parsed = TypeVar("Parsed", bound=BaseModel)


class QueryEncodingError(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message

    def as_error(self) -> dict[str, Any]:
        """In the shape of a pydantic error, so it is answered like every other invalid field."""
        return {"type": "query_encoding", "loc": ("query", *self.field.split(".")), "msg": self.message}


def parse_query(request: Request, shape: type[Parsed], scalars: tuple[str, ...]) -> Parsed:
    """The request's query string as `shape`, or the 400 that names what is wrong with it."""
    try:
        return shape.model_validate(query_fields(request.query_params.multi_items(), scalars))
    except QueryEncodingError as exc:
        raise RequestValidationError([exc.as_error()]) from exc
    except ValidationError as exc:
        raise RequestValidationError(
            [{**error, "loc": ("query", *error["loc"])} for error in exc.errors()]
        ) from exc


def query_fields(items: Iterable[tuple[str, str]], scalars: tuple[str, ...]) -> dict[str, Any]:
    """The query string as the query model's wire fields: {"dateRange": {"start": …}, "status": […], …}."""
    fields: dict[str, Any] = {}
    lists: dict[str, list[str]] = {}
    for key, value in items:
        if key in LISTS:
            parts = [part.strip() for part in value.split(",") if part.strip()]
            if not parts:
                raise QueryEncodingError(key, "is empty: give one or more values, comma-separated")
            lists.setdefault(key, []).extend(parts)
            continue
        target, member = _location(key, scalars)
        holder = fields.setdefault(target, {}) if member else fields
        name = member or target
        if name in holder:
            raise QueryEncodingError(
                _dotted(target, member), "is given more than once (in one form or several)"
            )
        holder[name] = value
    return fields | lists


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


def parameter(name: str, description: str, schema: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """One query parameter as the OpenAPI document describes it."""
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


FLATTENED_DATE_RANGE = [
    parameter("start", "Flattened form of `dateRange[start]`.", _DATE_TIME),
    parameter("end", "Flattened form of `dateRange[end]`.", _DATE_TIME),
]


def paged_query_openapi(things: str, filters: list[dict[str, Any]]) -> dict[str, Any]:
    """The parameters of a paged query over `things`: orgSlug, the route's `filters`, the date
    range, paging and the cursor (the `openapi_extra` of a route that parses its own query)."""
    return {
        "parameters": [
            parameter("orgSlug", "The organization the request acts on.", {"type": "string"}, required=True),
            *filters,
            date_range_parameter(things),
            parameter(
                "pagination",
                "`limit` 1..1000 (default 50) and `offset` ≥ 0 (default 0), e.g. `pagination[limit]=100`."
                + _ENCODINGS.format(name="pagination", members="limit=…&offset=…"),
                {"type": "object", "properties": {"limit": _LIMIT, "offset": _OFFSET}},
                style="deepObject",
                explode=True,
            ),
            *FLATTENED_DATE_RANGE,
            parameter("limit", "Flattened form of `pagination[limit]`.", _LIMIT),
            parameter("offset", "Flattened form of `pagination[offset]`.", _OFFSET),
            parameter(
                "cursor",
                "The `nextCursor` of the previous page: walks every match without deep offsets "
                "(not combined with an offset).",
                {"type": "string"},
            ),
        ]
    }


def date_range_parameter(things: str) -> dict[str, Any]:
    """The `dateRange` query object: `things` from `start` (inclusive) to `end` (exclusive)."""
    return parameter(
        "dateRange",
        f"{things.capitalize()} from `start` (inclusive) to `end` (exclusive), RFC 3339 with a time "
        "zone, e.g. `dateRange[start]=2026-01-01T00:00:00Z`."
        + _ENCODINGS.format(name="dateRange", members="start=…&end=…"),
        {"type": "object", "properties": {"start": _DATE_TIME, "end": _DATE_TIME}},
        style="deepObject",
        explode=True,
    )

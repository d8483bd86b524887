"""Building blocks shared by every wire model: naming, timestamps, identifiers, pages."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated, Any, Generic, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PlainSerializer, StringConstraints
from pydantic.alias_generators import to_camel


def format_timestamp(value: datetime) -> str:
    """RFC 3339 in UTC with a `Z`, millisecond precision."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


Timestamp = Annotated[datetime, PlainSerializer(format_timestamp, return_type=str, when_used="json")]

# An organization's slug: lowercase letters, digits and inner hyphens, as in a URL.
SLUG_PATTERN = r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$"
OrgSlug = Annotated[str, StringConstraints(pattern=SLUG_PATTERN, min_length=1, max_length=63)]
# A human-readable name: any printable text, trimmed, not empty.
NAME_MAX_LENGTH = 200
DESCRIPTION_MAX_LENGTH = 2000
Name = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=NAME_MAX_LENGTH)]
Description = Annotated[str, StringConstraints(max_length=DESCRIPTION_MAX_LENGTH)]

# Paging of every bounded list: `limit` 1..1000 (default 50), `offset` from 0.
MAX_PAGE_SIZE = 1000
DEFAULT_PAGE_SIZE = 50
PageLimit = Annotated[int, Field(ge=1, le=MAX_PAGE_SIZE, description="Items per page (1..1000).")]
PageOffset = Annotated[int, Field(ge=0, description="Items to skip before the page starts.")]

# Free-form JSON objects (configurations, schemas) are bounded by their compact JSON size.
JSON_OBJECT_MAX_BYTES = 64 * 1024


def _within_json_size(value: dict[str, Any]) -> dict[str, Any]:
    size = len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())
    if size > JSON_OBJECT_MAX_BYTES:
        raise ValueError(f"must be at most {JSON_OBJECT_MAX_BYTES} bytes as compact JSON (got {size})")
    return value


JsonObject = Annotated[dict[str, Any], AfterValidator(_within_json_size)]


def _refuse_null(value: Any) -> Any:
    if value is None:
        raise ValueError("cannot be null; leave the field out to keep its value")
    return value


PatchedValue = TypeVar("PatchedValue")
# A field of a PATCH body: left out, it keeps its value; sent as null, it is refused (ambiguous).
Patch = Annotated[PatchedValue | None, AfterValidator(_refuse_null)]


class Request(BaseModel):
    """A request body: camelCase on the wire, unknown fields refused."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", serialize_by_alias=True
    )


class Record(BaseModel):
    """A response body: camelCase on the wire; fields added by newer services are ignored."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="ignore",
        serialize_by_alias=True,
        from_attributes=True,
    )


Item = TypeVar("Item")


class Page(Record, Generic[Item]):
    """A list answer: the items of one page and how to get the next."""

    items: list[Item]
    limit: int | None = None
    offset: int | None = None
    total: int | None = None
    next_cursor: str | None = None


class OrgScoped(Request):
    org_slug: OrgSlug = Field(description="The organization the request acts on.")


class ErrorDetail(Record):
    field: str | None = None
    message: str
    type: str | None = None


class ErrorBody(Record):
    """Every error answer: `message` says what to fix; `code` is stable for programs."""

    message: str
    code: str
    details: list[ErrorDetail] = []

"""Building blocks shared by every wire model: naming, timestamps, identifiers, pages."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from typing import Annotated, Any, Generic, TypeVar

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    PlainSerializer,
    Strict,
    StringConstraints,
    WithJsonSchema,
)
from pydantic.alias_generators import to_camel
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError, core_schema


def format_timestamp(value: datetime) -> str:
    """RFC 3339 in UTC with a `Z`, millisecond precision."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# Its schema says what it is (a serializer returning str would say only "string"): generated
# clients read it as a date and time.
Timestamp = Annotated[
    datetime,
    PlainSerializer(format_timestamp, return_type=str, when_used="json"),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]

# An organization's slug: lowercase letters, digits and inner hyphens, as in a URL.
SLUG_PATTERN = r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$"
OrgSlug = Annotated[str, StringConstraints(pattern=SLUG_PATTERN, min_length=1, max_length=63)]


@dataclass(frozen=True)
class Matching:
    """A pattern a text must match. Its error says in words what is expected (never the regex, which
    means nothing to a person); the schema shows the pattern, for programs."""

    pattern: str
    kind: str
    explanation: str

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        compiled = re.compile(self.pattern)

        def check(value: str) -> str:
            if not compiled.match(value):
                raise PydanticCustomError(self.kind, self.explanation)
            return value

        return core_schema.no_info_after_validator_function(check, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        json_schema = handler(schema)
        json_schema["pattern"] = self.pattern
        return json_schema


RFC3339_START = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}")


def _rfc3339(value: Any) -> Any:
    # Lax parsing would read "6" as six seconds after 1970: a typo, not a moment anyone means.
    if isinstance(value, str) and not RFC3339_START.match(value):
        raise ValueError("must be an RFC 3339 date-time with its offset, e.g. 2026-11-24T09:30:00Z")
    return value


# Every date and moment a request carries falls within these UTC days (a 400 naming it otherwise).
# Nothing the service keeps is older than the Unix epoch, from which its time-ordered ids count
# (a range of ids before it would read wrong), and a year short of the calendar's end leaves room
# for the days, weeks and months reckoned from a date: at the edges (9999-12-31,
# 0001-01-01T00:00:00+14:00) adding a day or converting to UTC overflows.
EARLIEST_DAY = date(1970, 1, 1)
LATEST_DAY = date(9998, 12, 31)
_EARLIEST_MOMENT = datetime.combine(EARLIEST_DAY, time.min, tzinfo=UTC)
_LATEST_MOMENT = datetime.combine(LATEST_DAY, time.max, tzinfo=UTC)


def _within_calendar(value: date) -> date:
    """A date, or a moment compared in UTC whatever its offset, from EARLIEST_DAY to LATEST_DAY."""
    inside = (
        _EARLIEST_MOMENT <= value <= _LATEST_MOMENT
        if isinstance(value, datetime)
        else EARLIEST_DAY <= value <= LATEST_DAY
    )
    if not inside:
        raise PydanticCustomError(
            "calendar_range", f"must be within the UTC days {EARLIEST_DAY} to {LATEST_DAY}"
        )
    return value


# A moment a client sends: RFC 3339 text with its offset (read as text even in strict bodies).
Moment = Annotated[AwareDatetime, BeforeValidator(_rfc3339), Strict(False), AfterValidator(_within_calendar)]
# A UTC day a client sends (YYYY-MM-DD).
Day = Annotated[date, AfterValidator(_within_calendar)]


def Trimmed(max_length: int) -> Any:  # noqa: N802 (used like the types it builds)
    """Text trimmed of surrounding whitespace that must keep a character that is not whitespace
    (the pattern says so to readers of the schema; stripping already enforces it)."""
    return Annotated[
        str, StringConstraints(strip_whitespace=True, min_length=1, max_length=max_length, pattern=r"\S")
    ]


# A human-readable name: any printable text, trimmed, not empty.
NAME_MAX_LENGTH = 200
DESCRIPTION_MAX_LENGTH = 2000
Name = Trimmed(NAME_MAX_LENGTH)
Description = Annotated[str, StringConstraints(max_length=DESCRIPTION_MAX_LENGTH)]
# An address as a mail header carries it without quoting: a dot-atom of ASCII before the @, a host
# name after it. Quoted local parts, address literals and non-ASCII addresses are refused: a header
# would reinterpret them, so the message would go somewhere other than what was typed.
_ATOM = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
EmailAddress = Annotated[
    str,
    StringConstraints(
        strip_whitespace=True, pattern=rf"^{_ATOM}(?:\.{_ATOM})*@{_LABEL}(?:\.{_LABEL})+$", max_length=320
    ),
]

# Every whole number a request carries stays within a 32-bit signed integer, the smallest the
# databases compare it with: a larger one is refused at the door instead of failing in SQL.
MAX_INT32 = 2**31 - 1


def _whole_number(value: Any) -> Any:
    """JSON has one kind of number, so 20.0 is the whole number 20; text and booleans stay refused."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def WholeNumber(minimum: int, maximum: int = MAX_INT32) -> Any:  # noqa: N802 (used like a type)
    """A whole number from `minimum` to `maximum` (the bounds must come before the conversion, or
    the schema would not show them)."""
    return Annotated[int, Field(ge=minimum, le=maximum), BeforeValidator(_whole_number)]


# Paging of every bounded list: `limit` 1..1000 (default 50), `offset` 0..MAX_INT32.
MAX_PAGE_SIZE = 1000
DEFAULT_PAGE_SIZE = 50
PageLimit = Annotated[WholeNumber(1, MAX_PAGE_SIZE), Field(description="Items per page (1..1000).")]
PageOffset = Annotated[
    WholeNumber(0), Field(description="Items to skip before the page starts (0..2147483647).")
]

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
class _NullNotOffered:
    """Shows an optional field's schema without its `null`: null is not a value a client may send."""

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        json_schema = handler(schema)
        offered = [option for option in json_schema.get("anyOf", []) if option.get("type") != "null"]
        if len(offered) != 1:
            return json_schema
        return {key: value for key, value in json_schema.items() if key != "anyOf"} | offered[0]


Patch = Annotated[PatchedValue | None, AfterValidator(_refuse_null), _NullNotOffered()]


def patched_fields(request: BaseModel) -> dict[str, Any]:
    """What a PATCH request changes: the fields it was sent with, by attribute name, without the
    organization it names (a field sent as null is there, as null: the service decides what null
    means for it)."""
    return request.model_dump(exclude_unset=True, exclude={"org_slug"}, by_alias=False)


def SecretField(default: Any = ..., **extra: Any) -> Any:  # noqa: N802 (used like Field)
    """A field holding a secret: write-only in the schema, left out of reprs, redacted from the
    audit trail."""
    return Field(default, repr=False, json_schema_extra={"writeOnly": True}, **extra)


class Request(BaseModel):
    """A request body: camelCase on the wire, unknown fields refused, types strict (`"10"` is not
    a number and `true` is not 1: a client sending them has a bug worth hearing about)."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", serialize_by_alias=True, strict=True
    )


class QueryParameters(Request):
    """Parameters read from a query string, where every value arrives as text: `limit=10` is 10."""

    model_config = ConfigDict(strict=False)


class Record(BaseModel):
    """A response body: camelCase on the wire; fields added by newer services are ignored."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="ignore",
        serialize_by_alias=True,
        from_attributes=True,
        # Each answer's validator is built when it is first used, not as the module is imported: a
        # process reads a few of the kinds there are (the console's first page, a CLI command).
        defer_build=True,
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

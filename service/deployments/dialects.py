"""The few SQL expressions deployment analytics write differently for SQLite and PostgreSQL.

Constants are inlined, not bound: PostgreSQL matches a GROUP BY expression to the SELECT's by its
text, and two bound parameters never match.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from sqlalchemy import (
    Date,
    DateTime,
    Integer,
    Text,
    case,
    cast,
    extract,
    func,
    literal_column,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from api.deployments import FAILED_JOB_STATUSES
from service.db import dialect_name


def failed_flag(status: ColumnElement[str]) -> ColumnElement[int]:
    return case((status.in_(FAILED_JOB_STATUSES), 1), else_=0)


def utc_day(dialect: str, timestamp: ColumnElement[datetime]) -> ColumnElement[date]:
    if dialect == "postgresql":
        return cast(func.timezone(literal_column("'UTC'"), timestamp), Date)
    # SQLite keeps UTC timestamps as ISO 8601 text.
    return func.date(timestamp, type_=Date)


def utc_hour(dialect: str, timestamp: ColumnElement[datetime]) -> ColumnElement[int]:
    if dialect == "postgresql":
        return cast(extract("hour", func.timezone(literal_column("'UTC'"), timestamp)), Integer)
    return cast(func.strftime(literal_column("'%H'"), timestamp), Integer)


def weekday(dialect: str, day: ColumnElement[date]) -> ColumnElement[int]:
    """0 for Monday to 6 for Sunday."""
    if dialect == "postgresql":
        return cast(extract("isodow", day), Integer) - 1
    return (cast(func.strftime(literal_column("'%w'"), day), Integer) + 6) % 7


def month_start(dialect: str, day: ColumnElement[date]) -> ColumnElement[date]:
    if dialect == "postgresql":
        return cast(func.date_trunc(literal_column("'month'"), cast(day, DateTime)), Date)
    return func.date(day, literal_column("'start of month'"), type_=Date)


def wire_timestamp(dialect: str, timestamp: ColumnElement[datetime]) -> ColumnElement[str]:
    """A stored UTC timestamp as the wire writes it (api.common.format_timestamp): ISO 8601 to the
    millisecond, cut rather than rounded, with a Z; null stays null."""
    if dialect == "postgresql":
        utc = func.timezone(literal_column("'UTC'"), timestamp)
        return func.to_char(utc, literal_column('\'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"\''), type_=Text)
    # SQLite keeps `YYYY-MM-DD HH:MM:SS.ffffff`; a value written without its fraction gets one.
    text = cast(timestamp, Text)
    day = func.substr(text, literal_column("1"), literal_column("10"), type_=Text)
    clock = func.substr(
        text + literal_column("'.000000'"), literal_column("12"), literal_column("12"), type_=Text
    )
    return day + literal_column("'T'") + clock + literal_column("'Z'")


def upsert(session: Session, model: type[Any]) -> Any:
    """The dialect's INSERT of `model`, which has `on_conflict_do_update` and `excluded`."""
    return (postgresql if dialect_name(session) == "postgresql" else sqlite).insert(model)

"""The few SQL expressions deployment analytics write differently for SQLite and PostgreSQL.

Constants are inlined, not bound: PostgreSQL matches a GROUP BY expression to the SELECT's by its
text, and two bound parameters never match.
"""

from __future__ import annotations

from datetime import date, datetime

from sqlalchemy import (
    Date,
    DateTime,
    Integer,
    case,
    cast,
    extract,
    func,
    literal_column,
)
from sqlalchemy.sql.elements import ColumnElement

from api.deployments import FAILED_JOB_STATUSES


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

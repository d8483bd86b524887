"""The delivery log: every attempt, paged newest first by cursor with an exact total, and its counts
per day and per channel."""

from __future__ import annotations

import base64
import functools
import json
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Connection,
    FromClause,
    ScalarSelect,
    Select,
    bindparam,
    func,
    literal_column,
    select,
    tuple_,
)
from sqlalchemy.orm import Session

from api.notifications import (
    LOG_STATUSES,
    ChannelCounts,
    DateRange,
    DayCounts,
    LogEntry,
    LogQuery,
    LogStats,
)
from service.errors import InvalidCursor
from service.notifications.models import (
    DeliveryLogCountRow,
    DeliveryLogDayCountRow,
    DeliveryLogRow,
)
from service.storage.db import UTCDateTime, dialect_name, utc_day, utcnow
from service.storage.jsonsql import json_text, model_json_of

LOG = DeliveryLogRow.__table__
COUNTS = DeliveryLogCountRow.__table__
DAY_COUNTS = DeliveryLogDayCountRow.__table__
NEWEST_FIRST = (LOG.c.created_at.desc(), LOG.c.id.desc())
# A log query's filters besides its organization and time: columns of the log and of its counts by
# the same names. Which of them a query gives (and how many statuses), and which ends its range
# has, make its shape.
OPTIONAL_FILTERS = ("event_type", "channel_id")


@dataclass(frozen=True)
class LogPage:
    """A page of the log: each entry as its JSON text, in LogEntry's wire form."""

    entries: list[str]
    total: int
    next_cursor: str | None


def list_logs(session: Session, *, org_id: str, query: LogQuery) -> LogPage:
    """Delivery attempts, newest first: a page by offset (the spec's paging) or after a cursor.

    The hourly counts (DeliveryLogCount) give `total` and let a deep offset start in the hour
    that holds it; the page's ids then come from an index alone and only their rows are read.
    Statements are built once per shape and run with bind parameters, and the database writes the
    entries' JSON: building statements and converting rows in Python cost more than running them.
    """
    values = _filter_values(org_id, query)
    filters = tuple(name for name in values if name != "org_id")
    connection = session.connection()
    count = _count_logs(connection, filters, values, query.date_range)
    start, end = query.date_range.start, query.date_range.end
    offset, limit = query.pagination.offset, query.pagination.limit
    after: tuple[datetime, str] | None = None
    # Each way of going deep replaces the range's end: a database bounds an index scan by one
    # upper bound only, and would otherwise walk every match from the end down.
    if query.cursor:
        after = decode_cursor(query.cursor)
        if end is not None and end <= after[0]:
            after = None  # the range ends before the cursor: its end alone bounds the page
        else:
            end = None
    elif offset >= count.total:
        return LogPage(entries=[], total=count.total, next_cursor=None)
    elif offset:
        skipped = _skip_whole_hours(connection, filters, values, count, offset)
        if skipped:
            end, offset = skipped[0], offset - skipped[1]
    statement = _page_statement(
        dialect_name(session), filters, start=start is not None, end=end is not None, after=after is not None
    )
    after_at, after_id = after or (None, None)
    bounds = {"start": start, "end": end, "after_at": after_at, "after_id": after_id}
    rows = connection.execute(statement, values | bounds | {"offset": offset, "limit": limit + 1}).all()
    next_cursor = encode_cursor(*rows[limit - 1][1:]) if len(rows) > limit else None
    return LogPage(entries=[row[0] for row in rows[:limit]], total=count.total, next_cursor=next_cursor)


def _filter_values(org_id: str, query: LogQuery) -> dict[str, Any]:
    """The bind values of the query's organization and of the optional filters it gives, each
    status a value of its own (`status_0`, `status_1`, …): a list that SQLAlchemy expands is
    written into the statement's text again on every execution, five times a count."""
    given = {name: getattr(query, name) for name in OPTIONAL_FILTERS}
    values = {"org_id": org_id} | {name: value for name, value in given.items() if value}
    statuses = dict.fromkeys(query.status or ())
    return values | {f"status_{index}": status for index, status in enumerate(statuses)}


def _matching(table: FromClause, filters: tuple[str, ...]) -> list[ColumnElement[bool]]:
    """The organization and `filters` on the log or on its counts, as bind parameters of their names."""
    matches = [table.c.org_id == bindparam("org_id")]
    matches += [table.c[name] == bindparam(name) for name in filters if name in OPTIONAL_FILTERS]
    statuses = [bindparam(name) for name in filters if name not in OPTIONAL_FILTERS]
    if statuses:
        matches.append(table.c.status.in_(statuses) if len(statuses) > 1 else table.c.status == statuses[0])
    return matches


def instant(name: str) -> BindParameter[datetime]:
    """A bound instant, typed as the tables' timestamps are (a bare one reaches SQLite in another format)."""
    return bindparam(name, type_=UTCDateTime())


def _between(low: str | None, high: str | None) -> list[ColumnElement[bool]]:
    """Log rows from the bound instant named `low` (inclusive) to the one named `high` (exclusive)."""
    bounds = []
    if low:
        bounds.append(LOG.c.created_at >= instant(low))
    if high:
        bounds.append(LOG.c.created_at < instant(high))
    return bounds


def _in_period(
    period: ColumnElement[datetime], filters: tuple[str, ...], low: str | None, high: str | None
) -> list[ColumnElement[bool]]:
    """The rows of a count table (hourly or daily, by its `period` column) matching `filters`, from
    the bound instant named `low` up to the one named `high`, where given."""
    conditions = _matching(period.table, filters)
    if low:
        conditions.append(period >= instant(low))
    if high:
        conditions.append(period < instant(high))
    return conditions


@dataclass(frozen=True)
class _LogCount:
    """The matches of a log query: `newest` in the partial hour at the range's end (from `top`),
    `whole` in the whole hours below it, then the rest of `total` in the partial hour at its start
    (below `bottom`). `bounds` holds those of start, end, bottom and top the range has."""

    total: int
    newest: int
    whole: int
    bounds: dict[str, datetime]


def _count_logs(
    connection: Connection, filters: tuple[str, ...], values: dict[str, Any], date_range: DateRange
) -> _LogCount:
    """Count the matches from the hourly counts of the whole hours in range and from the rows of
    the partial hours at its ends, in one statement: the cost follows the length of the range, not
    the number of matches."""
    start, end = date_range.start, date_range.end
    bounds = _hour_bounds(start, end)
    statement = _count_statement(filters, start=start is not None, end=end is not None)
    newest, whole, oldest = connection.execute(statement, values | bounds).one()
    return _LogCount(total=newest + whole + oldest, newest=newest, whole=whole, bounds=bounds)


def _hour_bounds(start: datetime | None, end: datetime | None) -> dict[str, datetime]:
    """The range's ends, and `bottom` and `top`, where the whole hours in it begin and end. With no
    whole hour between, both are the hour boundary in the range or, in a range within one hour,
    its start: all of it is then counted as the partial hour at the end. Within the whole hours,
    `first_day` and `last_day` bound the whole days (the same instant when there is none)."""
    bounds: dict[str, datetime] = {}
    if end:
        top = _hour_floor(end)
        bounds |= {"end": end, "top": max(top, start) if start else top}
    if start:
        bottom = _hour_ceiling(start)
        bounds |= {"start": start, "bottom": min(bottom, bounds["top"]) if end else bottom}
    if start:
        first_day = _day_ceiling(bounds["bottom"])
        bounds["first_day"] = min(first_day, bounds["top"]) if end else first_day
    if end:
        last_day = _hour_floor(bounds["top"]).replace(hour=0)
        bounds["last_day"] = max(last_day, bounds["first_day"]) if start else last_day
    return bounds


@functools.cache
def _count_statement(filters: tuple[str, ...], *, start: bool, end: bool) -> Select[tuple[int, int, int]]:
    """(newest, whole, oldest) of a range with the given ends, from the bounds of _hour_bounds: the
    whole hours' matches are the day counts' of the whole days and the hourly counts' of the hours
    around them."""
    whole = _counted(DAY_COUNTS.c.day, filters, "first_day" if start else None, "last_day" if end else None)
    if start:
        whole = whole + _counted(COUNTS.c.hour, filters, "bottom", "first_day")
    if end:
        whole = whole + _counted(COUNTS.c.hour, filters, "last_day", "top")
    newest = _rows_between(filters, "top", "end") if end else literal_column("0")
    oldest = _rows_between(filters, "start", "bottom") if start else literal_column("0")
    return select(newest, whole, oldest)


def _counted(
    period: ColumnElement[datetime], filters: tuple[str, ...], low: str | None, high: str | None
) -> Any:
    """The matches a count table holds over a period (see _in_period)."""
    attempts = period.table.c.attempts
    return (
        select(func.coalesce(func.sum(attempts), 0))
        .where(*_in_period(period, filters, low, high))
        .scalar_subquery()
    )


def _rows_between(filters: tuple[str, ...], low: str, high: str) -> ScalarSelect[int]:
    """How many log rows match between the bound instants named `low` and `high`."""
    return (
        select(func.count())
        .select_from(LOG)
        .where(*_matching(LOG, filters), *_between(low, high))
        .scalar_subquery()
    )


def _skip_whole_hours(
    connection: Connection, filters: tuple[str, ...], values: dict[str, Any], count: _LogCount, offset: int
) -> tuple[datetime, int] | None:
    """A time before which the page at `offset` starts, and how many newer matches that skips:
    the start of the hour below the one the offset falls in, found from the hourly counts."""
    bottom = count.bounds.get("bottom")
    if offset < count.newest:
        return None
    if offset >= count.newest + count.whole:
        return (bottom, count.newest + count.whole) if bottom else None
    statement = _hour_of_match(filters, bottom=bottom is not None, top="top" in count.bounds)
    hour, newer = connection.execute(statement, values | count.bounds | {"skip": offset - count.newest}).one()
    # Every match from the end of that hour on is newer than the offset: no need to walk them.
    return hour + timedelta(hours=1), count.newest + newer


@functools.cache
def _hour_of_match(filters: tuple[str, ...], *, bottom: bool, top: bool) -> Select[tuple[datetime, int]]:
    """The whole hour holding the match at offset `skip` counted down from `top`, and how many
    matches of the whole hours are newer than that hour."""
    per_hour = (
        select(COUNTS.c.hour, func.sum(COUNTS.c.attempts).label("attempts"))
        .where(*_in_period(COUNTS.c.hour, filters, "bottom" if bottom else None, "top" if top else None))
        .group_by(COUNTS.c.hour)
        .subquery()
    )
    running = func.sum(per_hour.c.attempts).over(order_by=per_hour.c.hour.desc())
    hours = select(per_hour.c.hour, per_hour.c.attempts, running.label("running")).subquery()
    return (
        select(hours.c.hour, hours.c.running - hours.c.attempts)
        .where(hours.c.running > bindparam("skip"))
        .order_by(hours.c.hour.desc())
        .limit(1)
    )


@functools.cache
def _page_statement(
    dialect: str, filters: tuple[str, ...], *, start: bool, end: bool, after: bool
) -> Select[tuple[str, datetime, str]]:
    """A page's entries (JSON) with the created_at and id a cursor takes, newest first, from
    `offset` and `limit` matches, between `start` and `end` and below (`after_at`, `after_id`)."""
    ids = select(LOG.c.id).where(
        *_matching(LOG, filters), *_between("start" if start else None, "end" if end else None)
    )
    if after:
        ids = ids.where(
            tuple_(LOG.c.created_at, LOG.c.id) < tuple_(instant("after_at"), bindparam("after_id"))
        )
    ids = ids.order_by(*NEWEST_FIRST).offset(bindparam("offset")).limit(bindparam("limit"))
    # A log entry's fields are the log's columns of the same names.
    entries = select(
        json_text(dialect, model_json_of(dialect, LogEntry, LOG.c)), LOG.c.created_at, LOG.c.id
    ).where(LOG.c.id.in_(ids))
    return entries.order_by(*NEWEST_FIRST)


def _hour_floor(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def _hour_ceiling(moment: datetime) -> datetime:
    floor = _hour_floor(moment)
    return floor if floor == moment else floor + timedelta(hours=1)


def _day_ceiling(moment: datetime) -> datetime:
    floor = _hour_floor(moment).replace(hour=0)
    return floor if floor == moment else floor + timedelta(days=1)


def encode_cursor(created_at: datetime, log_id: str) -> str:
    raw = json.dumps([created_at.isoformat(), log_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        created_at, log_id = json.loads(raw)
        moment = datetime.fromisoformat(created_at)
        if moment.tzinfo is None:
            raise ValueError("naive timestamp")
        return moment, str(log_id)
    except (ValueError, TypeError) as exc:
        raise InvalidCursor from exc


def log_stats(session: Session, *, org_id: str, days: int) -> LogStats:
    """Attempts per UTC day and per channel, by outcome, over the last `days` days (counted in SQL)."""
    first_day = utcnow().date() - timedelta(days=days - 1)
    start = datetime.combine(first_day, time.min, tzinfo=UTC)
    # Both counts read one range of the (org_id, created_at) index. The end bound keeps out a row
    # stamped after today by a process whose clock runs ahead.
    in_period = (
        DeliveryLogRow.org_id == org_id,
        DeliveryLogRow.created_at >= start,
        DeliveryLogRow.created_at < start + timedelta(days=days),
    )
    day = utc_day(session, DeliveryLogRow.created_at)
    per_day = {first_day + timedelta(days=n): dict.fromkeys(LOG_STATUSES, 0) for n in range(days)}
    by_day = (
        select(day, DeliveryLogRow.status, func.count())
        .where(*in_period)
        .group_by(day, DeliveryLogRow.status)
    )
    for day_text, status, count in session.execute(by_day):
        per_day[date.fromisoformat(day_text)][status] = count
    channel = (DeliveryLogRow.channel_id, DeliveryLogRow.channel_name, DeliveryLogRow.channel_kind)
    per_channel: dict[tuple[str, str, str], dict[str, int]] = {}
    by_channel = (
        select(*channel, DeliveryLogRow.status, func.count())
        .where(*in_period)
        .group_by(*channel, DeliveryLogRow.status)
    )
    for channel_id, name, kind, status, count in session.execute(by_channel):
        per_channel.setdefault((channel_id, name, kind), dict.fromkeys(LOG_STATUSES, 0))[status] = count
    return LogStats(
        days=days,
        start=start,
        per_day=[DayCounts(day=d, **counts) for d, counts in per_day.items()],
        per_channel=sorted(
            (_channel_counts(*channel_key, counts) for channel_key, counts in per_channel.items()),
            key=lambda c: (-(c.sent + c.failed + c.dead), c.channel_name),
        ),
    )


def _channel_counts(channel_id: str, name: str, kind: str, counts: dict[str, int]) -> ChannelCounts:
    attempts = sum(counts.values())
    return ChannelCounts(
        channel_id=channel_id,
        channel_name=name,
        channel_kind=kind,
        failure_rate=(counts["failed"] + counts["dead"]) / attempts,
        **counts,
    )

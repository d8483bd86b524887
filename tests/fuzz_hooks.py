"""Schemathesis hooks of the fuzzing test (tests/test_fuzz.py): values at the edges of what a request
can carry, drawn beside the schema's own, where they hide 500s the schema's values never reach.

- Every date and date-time (the filters' `start`, `end` and `dateRange`, a recovery's `since`) is
  now and then one at the calendar's edges: 9999-12-31, 0001-01-01T00:00:00+14:00 (before year 1
  in UTC), moments at the widest offsets, days before 1970.
- Every number in a JSON body (a field of type integer or number) is now and then an integer far
  beyond a double's range, of hundreds or thousands of digits (past the 4300 Python reads as an int).

Loaded by the schemathesis process alone (`SCHEMATHESIS_HOOKS`), never by pytest.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any

import schemathesis
from hypothesis import strategies as st

# This process writes integers of any length into the bodies it sends.
sys.set_int_max_str_digits(0)

EDGE_DAYS = ["9999-12-31", "0001-01-01", "0001-01-01T00:00:00+14:00", "1969-12-31"]
EDGE_MOMENTS = [
    "0001-01-01T00:00:00+14:00",
    "0001-01-01T00:00:00Z",
    "9999-12-31T23:59:59-14:00",
    "9999-12-31T23:59:59.999999Z",
    "1969-12-31T23:59:59Z",
]
# Moments anywhere in the calendar, at UTC and at the widest offsets there are.
WIDEST_OFFSETS = st.sampled_from([UTC, timezone(timedelta(hours=14)), timezone(-timedelta(hours=14))])
MOMENTS = st.datetimes(timezones=WIDEST_OFFSETS).map(datetime.isoformat)
HUGE_INTEGERS = st.sampled_from([10**400, -(10**5000) + 1])

schemathesis.openapi.format("date", st.one_of(st.sampled_from(EDGE_DAYS), st.dates().map(date.isoformat)))
schemathesis.openapi.format("date-time", st.one_of(st.sampled_from(EDGE_MOMENTS), MOMENTS))


@schemathesis.hook
def flatmap_body(_context: Any, body: Any) -> st.SearchStrategy[Any]:
    """The body as drawn, or with one of its numbers replaced by a huge integer."""
    places = list(_numbers(body, ()))
    if not places:
        return st.just(body)
    replaced = st.tuples(st.sampled_from(places), HUGE_INTEGERS).map(lambda drawn: _replaced(body, *drawn))
    return st.one_of(st.just(body), replaced)


def _numbers(value: Any, where: tuple[Any, ...]) -> Iterator[tuple[Any, ...]]:
    """Where the numbers of a JSON value are, as paths of keys and indexes."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _numbers(item, (*where, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _numbers(item, (*where, index))
    elif isinstance(value, int | float) and not isinstance(value, bool):
        yield where


def _replaced(body: Any, where: tuple[Any, ...], number: int) -> Any:
    if not where:
        return number
    body = copy.deepcopy(body)
    holder = body
    for step in where[:-1]:
        holder = holder[step]
    holder[where[-1]] = number
    return body

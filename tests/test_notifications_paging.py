"""The delivery log's paging against a plain count: `total` from the daily and hourly counts, deep
offsets that start in the hour holding them, and cursors, for ranges that cut hours and days
anywhere."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import delete, func, insert, select

from api.events import EVENT_TYPES
from service.notifications.models import DeliveryLogCountRow, DeliveryLogDayCountRow, DeliveryLogRow
from service.orgs.models import OrganizationRow
from service.storage.db import Database
from service.storage.ids import new_id
from tests.conftest import Org

BASE = datetime(2026, 3, 1, tzinfo=UTC)
HOURS = 80
STATUSES = ("sent", "failed", "dead")
CHANNELS = ("ch_paging_a", "ch_paging_b")


@dataclass(frozen=True)
class Row:
    id: str
    created_at: datetime
    channel_id: str
    status: str
    event_type: str


def seed(db: Database, org: Org, rng: random.Random) -> list[Row]:
    """400 attempts over 80 hours: some exactly on an hour or at midnight, some sharing a timestamp,
    inserted half as objects and half in one executemany (the two ways the log is written)."""
    moments = [BASE + timedelta(seconds=rng.uniform(0, HOURS * 3600)) for _ in range(380)]
    moments += [BASE + timedelta(hours=hour) for hour in (0, 5, 12, 24, 29, 48)]
    moments += [moments[7]] * 8 + [moments[100]] * 8  # ties, ordered by id
    rows = [
        Row(new_id("log"), moment, rng.choice(CHANNELS), rng.choice(STATUSES), rng.choice(EVENT_TYPES))
        for moment in moments
    ]
    with db.session(write=True) as session:
        org_id = session.scalar(select(OrganizationRow.id).where(OrganizationRow.slug == org.slug))
        values = [
            {
                "id": row.id,
                "org_id": org_id,
                "delivery_id": "msg" + row.id[3:],
                "event_id": "evt" + row.id[3:],
                "event_type": row.event_type,
                "channel_id": row.channel_id,
                "channel_name": row.channel_id,
                "channel_kind": "webhook",
                "attempt": 1,
                "status": row.status,
                "created_at": row.created_at,
            }
            for row in rows
        ]
        session.add_all(DeliveryLogRow(**value) for value in values[::2])
        session.flush()
        session.execute(insert(DeliveryLogRow), values[1::2])
    return rows


def expected(rows: list[Row], params: dict[str, Any]) -> list[str]:
    """The matching ids, newest first, counted the plain way."""
    start, end = params.get("start"), params.get("end")
    statuses = params["status"].split(",") if "status" in params else None
    matches = [
        row
        for row in rows
        if (start is None or row.created_at >= start)
        and (end is None or row.created_at < end)
        and params.get("channelId", row.channel_id) == row.channel_id
        and params.get("eventType", row.event_type) == row.event_type
        and (statuses is None or row.status in statuses)
    ]
    return [row.id for row in sorted(matches, key=lambda r: (r.created_at, r.id), reverse=True)]


def random_query(rng: random.Random) -> dict[str, Any]:
    params: dict[str, Any] = {}
    if rng.random() < 0.8:
        params["start"] = BASE + timedelta(seconds=rng.uniform(-3600, HOURS * 3600))
    if rng.random() < 0.8:
        low = params.get("start", BASE)
        # Mostly hours or days long, sometimes within one hour, sometimes on exact hours.
        length = rng.choice([rng.uniform(0, 3600), rng.uniform(0, 40 * 3600), rng.uniform(0, 90 * 3600)])
        params["end"] = low + timedelta(seconds=length)
    if rng.random() < 0.2:
        for bound in ("start", "end"):
            if bound in params:
                params[bound] = params[bound].replace(minute=0, second=0, microsecond=0)
    if "start" in params and "end" in params and params["end"] <= params["start"]:
        params["end"] = params["start"] + timedelta(hours=1)
    if rng.random() < 0.5:
        params["channelId"] = rng.choice(CHANNELS)
    if rng.random() < 0.5:
        params["status"] = ",".join(rng.sample(STATUSES, rng.randint(1, 2)))
    if rng.random() < 0.2:
        params["eventType"] = rng.choice(EVENT_TYPES)
    return params


def page(http, org: Org, params: dict[str, Any]) -> dict[str, Any]:
    wire = {key: value.isoformat() if isinstance(value, datetime) else value for key, value in params.items()}
    response = http.get("notifications/logs", params={"orgSlug": org.slug, **wire}, headers=org.headers)
    assert response.status_code == 200, response.text
    return response.json()


def check_offsets(http, org: Org, rows: list[Row], rng: random.Random, queries: int) -> None:
    for _ in range(queries):
        params = random_query(rng)
        ids = expected(rows, params)
        limit = rng.choice([1, 7, 50])
        for offset in {0, rng.randint(0, len(ids) + 5), max(0, len(ids) - 3), len(ids) + 20}:
            answer = page(http, org, {**params, "limit": limit, "offset": offset})
            assert answer["total"] == len(ids), params
            assert [entry["id"] for entry in answer["items"]] == ids[offset : offset + limit], (
                params,
                offset,
            )


def test_totals_and_offsets_match_a_plain_count(http, org, db):
    rng = random.Random(20260301)
    rows = seed(db, org, rng)
    check_offsets(http, org, rows, rng, queries=40)


def test_a_cursor_walks_the_same_rows_as_offsets(http, org, db):
    rng = random.Random(11)
    rows = seed(db, org, rng)
    for params in [
        {},
        {"channelId": CHANNELS[0], "status": "sent,dead"},
        {"start": BASE + timedelta(hours=3, minutes=17), "end": BASE + timedelta(hours=21, seconds=9.5)},
    ]:
        walked: list[str] = []
        answer = page(http, org, {**params, "limit": 23})
        while True:
            walked += [entry["id"] for entry in answer["items"]]
            if not answer["nextCursor"]:
                break
            answer = page(http, org, {**params, "limit": 23, "cursor": answer["nextCursor"]})
        assert walked == expected(rows, params)


def test_a_range_ending_before_the_cursor_ends_the_walk(http, org, db):
    rows = seed(db, org, random.Random(5))
    first = page(http, org, {"limit": 10})
    end = BASE + timedelta(hours=4, minutes=30)
    answer = page(http, org, {"end": end, "limit": 10, "cursor": first["nextCursor"]})
    assert [entry["id"] for entry in answer["items"]] == expected(rows, {"end": end})[:10]


def test_deleted_attempts_leave_the_counts(http, org, db):
    rng = random.Random(3)
    rows = seed(db, org, rng)
    doomed = {row.id for row in rng.sample(rows, 60)}
    with db.session(write=True) as session:
        session.execute(delete(DeliveryLogRow).where(DeliveryLogRow.id.in_(doomed)))
    kept = [row for row in rows if row.id not in doomed]
    with db.session() as session:
        org_id = session.scalar(select(OrganizationRow.id).where(OrganizationRow.slug == org.slug))
        for counts in (DeliveryLogCountRow, DeliveryLogDayCountRow):
            counted = session.scalar(select(func.sum(counts.attempts)).where(counts.org_id == org_id))
            assert counted == len(kept), counts
    check_offsets(http, org, kept, rng, queries=10)


@pytest.mark.parametrize("offset", [0, 3, 10_000])
def test_an_empty_log_pages_to_nothing(http, org, offset):
    answer = page(http, org, {"start": BASE, "end": BASE + timedelta(days=1), "offset": offset})
    assert (answer["items"], answer["total"], answer["nextCursor"]) == ([], 0, None)


def test_a_cursor_past_every_match_still_counts_the_range(http, org, db):
    """A page after a cursor that nothing in the range follows is empty, and its total is still
    every match of the range."""
    rows = seed(db, org, random.Random(8))
    first = page(http, org, {"limit": 10})
    start = datetime.fromisoformat(first["items"][-1]["createdAt"]) + timedelta(seconds=1)
    answer = page(http, org, {"start": start, "limit": 10, "cursor": first["nextCursor"]})
    assert (answer["items"], answer["nextCursor"]) == ([], None)
    assert answer["total"] == len(expected(rows, {"start": start})) > 0

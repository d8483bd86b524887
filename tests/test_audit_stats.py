"""GET /audit-events/stats: changes per day by action and per actor, counted in the database."""

from __future__ import annotations

import random
from collections import Counter
from datetime import UTC, datetime, timedelta

from sqlalchemy import insert, select

from service.orgs.models import OrganizationRow
from service.storage.db import Database
from service.storage.ids import new_id
from service.trail.models import AuditEventRow
from tests.conftest import Org

ACTIONS = ("createAgent", "updateAgent", "createEnvironment", "publishArtifact")
ACTORS = tuple(
    {"actor_member_id": member, "actor_member_email": email, "actor_key_id": key, "actor_key_name": name}
    for member, email, key, name in (
        ("mem_a", "a@example.com", "key_a1", "laptop"),
        ("mem_a", "a@example.com", "key_a2", "desktop"),
        ("mem_b", "b@example.com", "key_b", "laptop"),
        (None, None, "key_ci", "ci"),
    )
)
NOON = datetime(2026, 3, 10, 12, tzinfo=UTC)


def seed(db: Database, org: Org, count: int, rng: random.Random) -> list[dict]:
    """`count` events at random moments of the 20 days before NOON, straight into the table."""
    with db.engine.begin() as connection:
        org_id = connection.scalar(select(OrganizationRow.id).where(OrganizationRow.slug == org.slug))
        rows = [
            {
                "id": new_id("aud"),
                "org_id": org_id,
                "occurred_at": NOON - timedelta(seconds=rng.randrange(20 * 86_400)),
                "action": rng.choice(ACTIONS),
                "changes": {},
                **rng.choice(ACTORS),
            }
            for _ in range(count)
        ]
        connection.execute(insert(AuditEventRow), rows)
    return rows


def stats(http, org: Org, **params: str) -> dict:
    answer = http.get("audit-events/stats", params={"orgSlug": org.slug, **params}, headers=org.headers)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_counts_per_day_and_action_are_exact(http, db, org, other_org):
    rng = random.Random()
    rows = seed(db, org, 400, rng)
    seed(db, other_org, 50, rng)
    start, end = NOON - timedelta(days=12, hours=5), NOON - timedelta(days=2)
    inside = [row for row in rows if start <= row["occurred_at"] < end]
    expected = Counter((row["occurred_at"].date().isoformat(), row["action"]) for row in inside)

    answer = stats(http, org, **{"dateRange[start]": start.isoformat(), "dateRange[end]": end.isoformat()})

    got = {(item["day"], item["action"]): item["count"] for item in answer["perDay"]}
    assert got == dict(expected)
    assert [(i["day"], i["action"]) for i in answer["perDay"]] == sorted(got)
    assert answer["total"] == len(inside)
    members = Counter(row.get("actor_member_email") or row["actor_key_name"] for row in inside)
    actors = {item["memberEmail"] or item["keyName"]: item["count"] for item in answer["perActor"]}
    assert actors == dict(members)
    service_key = next(item for item in answer["perActor"] if item["keyName"] == "ci")
    assert service_key["keyId"] == "key_ci" and service_key["memberId"] is None
    assert [item["count"] for item in answer["perActor"]] == sorted(actors.values(), reverse=True)


def test_every_org_counts_only_its_own(http, db, org, other_org):
    seed(db, other_org, 30, random.Random())
    period = {"start": (NOON - timedelta(days=30)).isoformat(), "end": NOON.isoformat()}
    answer = stats(http, org, **period)
    assert answer["perDay"] == [] and answer["perActor"] == [] and answer["total"] == 0
    assert stats(http, other_org, **period)["total"] == 30
    refused = http.get("audit-events/stats", params={"orgSlug": other_org.slug}, headers=org.headers)
    assert refused.status_code == 403


def test_default_period_is_the_last_30_days_and_counts_real_changes(http, org, client):
    client.agents.create("triage", "openai", provider_config={"model": "m"})
    answer = stats(http, org)
    end, start = datetime.fromisoformat(answer["end"]), datetime.fromisoformat(answer["start"])
    assert end - start == timedelta(days=30)
    assert abs(end - datetime.now(UTC)) < timedelta(minutes=1)
    assert {item["action"] for item in answer["perDay"]} >= {"createAgent"}
    assert client.audit.stats().total == answer["total"]


def test_a_bad_date_range_is_400_naming_it(http, org):
    cases = [
        {"dateRange[start]": "yesterday"},
        {"dateRange[start]": "2026-03-02T00:00:00Z", "dateRange[end]": "2026-03-01T00:00:00Z"},
        {"dateRange[start]": "2024-01-01T00:00:00Z", "dateRange[end]": "2026-01-01T00:00:00Z"},
        {"dateRange[start]": "2026-03-01T00:00:00Z", "start": "2026-03-01T00:00:00Z"},
        {"pagination[limit]": "5"},
        {"dateRange[end]": "0001-01-02T00:00:00Z"},
    ]
    for params in cases:
        answer = http.get("audit-events/stats", params={"orgSlug": org.slug, **params}, headers=org.headers)
        assert answer.status_code == 400, (params, answer.text)
        body = answer.json()
        named = body["message"] + " ".join(detail["field"] for detail in body["details"])
        assert "dateRange" in named or "pagination" in named, body


def test_the_lists_filters_narrow_the_counts(http, db, org):
    rows = seed(db, org, 300, random.Random())
    period = {
        "dateRange[start]": (NOON - timedelta(days=25)).isoformat(),
        "dateRange[end]": (NOON + timedelta(days=1)).isoformat(),
    }
    answer = stats(http, org, **period, action="updateAgent", actor="key_b")
    chosen = [row for row in rows if row["action"] == "updateAgent" and row["actor_key_id"] == "key_b"]
    assert answer["total"] == len(chosen)
    assert {item["action"] for item in answer["perDay"]} <= {"updateAgent"}
    assert [item["keyName"] or item["memberEmail"] for item in answer["perActor"]] == (
        ["b@example.com"] if chosen else []
    )
    assert stats(http, org, **period, targetType="agent")["total"] == 0  # seeded without targets

"""GET /audit-events/export and `orgdeck audit export`: every event of the range, oldest first, as
NDJSON; the export on record (who, which range), which lets retention prune what it covered."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta

from sqlalchemy import select

from api import OrgdeckClient
from service.retention.service import prune_pass
from service.storage.db import utcnow
from service.trail.models import AuditEventRow, AuditExportRow
from tests.conftest import Org, make_settings
from tests.processes import ROOT
from tests.test_retention import ages, audit_ids, org_id_of, seed_audit_events

DAY = timedelta(days=1)


def export_lines(http, org: Org, **params: str) -> list[dict]:
    with http.stream(
        "GET", "audit-events/export", params={"orgSlug": org.slug, **params}, headers=org.headers
    ) as answer:
        assert answer.status_code == 200, answer.read()
        assert answer.headers["content-type"].startswith("application/x-ndjson")
        return [json.loads(line) for line in answer.iter_lines()]


def test_export_streams_every_event_of_the_range_oldest_first(http, db, org, other_org):
    org_id, now = org_id_of(db, org), utcnow()
    # Over two pages of 1,000, at moments a millisecond apart or days apart.
    moments = [now - 40 * DAY + timedelta(milliseconds=index) for index in range(2100)]
    inside = seed_audit_events(db, org_id, [*moments, *ages(now, 30, 21)])
    before = seed_audit_events(db, org_id, ages(now, 41, 50))
    after = seed_audit_events(db, org_id, ages(now, 19))
    seed_audit_events(db, org_id_of(db, other_org), ages(now, 30))

    start, end = now - 40 * DAY, now - 20 * DAY
    lines = export_lines(
        http, org, **{"dateRange[start]": start.isoformat(), "dateRange[end]": end.isoformat()}
    )

    assert [line["id"] for line in lines] == sorted(inside)
    assert not {line["id"] for line in lines} & set(before + after)
    assert lines[0]["action"] == "createAgent" and "actor" in lines[0] and "target" in lines[0]
    with db.session() as session:
        export = session.scalars(select(AuditExportRow).where(AuditExportRow.org_id == org_id)).one()
        recorded = session.scalars(
            select(AuditEventRow).where(
                AuditEventRow.org_id == org_id, AuditEventRow.action == "exportAuditEvents"
            )
        ).one()
    assert export.completed_at is not None and export.range_start == start and export.range_end == end
    assert export.actor_key_id == recorded.actor_key_id is not None


def test_an_export_lets_retention_prune_what_it_covered(http, db, settings, org):
    org_id, now = org_id_of(db, org), utcnow()
    old = seed_audit_events(db, org_id, ages(now, 200, 150, 120))
    recent = seed_audit_events(db, org_id, ages(now, 10))
    keep_90_days = make_settings(settings.data_dir, settings.database_url, retention_audit_events_days=90)
    export_lines(http, org, **{"dateRange[end]": (now - 130 * DAY).isoformat()})

    prune_pass(db, keep_90_days)

    assert audit_ids(db, old + recent) == {old[2], *recent}  # 120 days old: past retention, not exported


def test_a_viewer_may_not_export_and_a_bad_range_is_400(http, server, org):
    with OrgdeckClient(server.url, org.key) as client:
        viewer = client.api_keys.create("reader", role="viewer", service=True).key
    refused = http.get("audit-events/export", params={"orgSlug": org.slug}, headers={"X-API-Key": viewer})
    assert refused.status_code == 403
    now = datetime.now(UTC)
    backwards = {
        "orgSlug": org.slug,
        "dateRange[start]": now.isoformat(),
        "dateRange[end]": (now - DAY).isoformat(),
    }
    bad = http.get("audit-events/export", params=backwards, headers=org.headers)
    assert bad.status_code == 400 and bad.json()["details"][0]["field"] == "dateRange"
    unreadable = http.get(
        "audit-events/export", params={"orgSlug": org.slug, "dateRange[start]": "soon"}, headers=org.headers
    )
    assert unreadable.status_code == 400


def run_orgdeck(server, org: Org, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ORGDECK_API_URL": server.url, "ORGDECK_API_KEY": org.key}
    return subprocess.run(
        [sys.executable, "-m", "api", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def test_the_command_line_writes_the_export_to_stdout(server, db, org):
    org_id, now = org_id_of(db, org), utcnow()
    events = seed_audit_events(db, org_id, ages(now, 3, 2.5, 1))
    day = (now - 2.9 * DAY).date().isoformat()

    done = run_orgdeck(
        server,
        org,
        "audit",
        "export",
        "--from",
        (now - 2.9 * DAY).isoformat(),
        "--to",
        (now - 2 * DAY).isoformat(),
    )
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["id"] for line in done.stdout.splitlines()] == [events[1]]
    assert "Exported 1 audit events" in done.stderr

    everything = run_orgdeck(server, org, "audit", "export", "--from", day)
    assert set(events[1:]) <= {json.loads(line)["id"] for line in everything.stdout.splitlines()}

    refused = run_orgdeck(
        server, org, "audit", "export", "--from", "2026-02-01", "--to", "2026-01-01", "--json"
    )
    assert refused.returncode == 1
    assert json.loads(refused.stdout)["error"]["code"] == "invalid_request"

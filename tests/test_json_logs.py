"""ORGDECK_LOG_FORMAT=json: `serve` writes one JSON object per line, one access line per request with
its request id, route template, status and duration, and no credential in any field."""

from __future__ import annotations

import json

import httpx

from service.runtime.bootstrap import create_org_with_key
from service.storage.db import Database
from tests.conftest import service_env
from tests.processes import serving

PLANTED = "sk-planted-0123456789abcdef"


def test_json_lines_one_per_request_with_its_id_and_no_secret(tmp_path, database_url, db: Database):
    slug, key = create_org_with_key(db, slug="json-logs", name="JSON logs", key_name="admin")
    env = service_env(tmp_path, database_url, ORGDECK_LOG_FORMAT="json", ORGDECK_RUN_WORKER="false")
    log = tmp_path / "service.log"
    with (
        serving(env, log=log) as base,
        httpx.Client(base_url=base + "/", headers={"X-API-Key": key}, timeout=30) as http,
    ):
        found = http.get("api-keys", params={"orgSlug": slug}, headers={"X-Request-Id": "req-json-1"})
        missing = http.get(f"agents/{PLANTED}", params={"orgSlug": slug, "token": PLANTED})
        refused = http.get("whoami", headers={"X-API-Key": "odk_" + "Z" * 38})
    stderr = log.read_text()
    assert (found.status_code, missing.status_code, refused.status_code) == (200, 404, 401)

    lines = [json.loads(line) for line in stderr.splitlines() if line.strip()]  # every line is JSON
    assert all({"time", "level", "logger", "message"} <= set(entry) for entry in lines)
    access = [
        entry
        for entry in lines
        if entry["logger"] == "orgdeck.access" and entry["route"] != "/api/health/live"
    ]
    # A line is written once its answer is sent: in the order the requests end, not begin.
    by_id = {entry["requestId"]: entry for entry in access}
    assert len(access) == len(by_id) == 3
    assert by_id.keys() == {
        found.headers["x-request-id"],
        missing.headers["x-request-id"],
        refused.headers["x-request-id"],
    }
    shown = {
        answer.request.url.path: (
            by_id[answer.headers["x-request-id"]]["route"],
            by_id[answer.headers["x-request-id"]]["status"],
        )
        for answer in (found, missing, refused)
    }
    assert shown == {
        "/api/api-keys": ("/api/api-keys", 200),
        f"/api/agents/{PLANTED}": ("/api/agents/{stableKey}", 404),
        "/api/whoami": ("/api/whoami", 401),
    }
    assert found.headers["x-request-id"] == "req-json-1"
    assert by_id["req-json-1"]["org"] == slug and by_id["req-json-1"]["actorId"].startswith("key_")
    assert "org" not in by_id[refused.headers["x-request-id"]]
    assert all(entry["durationMs"] >= 0 for entry in access)
    assert PLANTED not in stderr and key not in stderr and "Z" * 38 not in stderr

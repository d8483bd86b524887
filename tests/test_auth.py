"""The authentication matrix, for every route that needs a key.

Each area adds its routes to ROUTES: (method, path, query, body), where "{org}" stands for the
caller's organization slug.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from api import OrgdeckClient
from service.api_keys.keys import generate_key
from tests.conftest import Org

ROUTES: list[tuple[str, str, dict[str, str], dict[str, Any] | None]] = [
    ("GET", "whoami", {}, None),
    ("GET", "api-keys", {"orgSlug": "{org}"}, None),
    ("POST", "api-keys", {}, {"orgSlug": "{org}", "name": "matrix"}),
    ("DELETE", "api-keys/key_doesnotexist", {"orgSlug": "{org}"}, None),
    ("GET", "registries", {"orgSlug": "{org}"}, None),
    ("POST", "registries", {}, {"orgSlug": "{org}", "name": "matrix"}),
    ("POST", "environments", {}, {"orgSlug": "{org}", "name": "matrix"}),
    ("POST", "environments/list", {}, {"orgSlug": "{org}"}),
    ("GET", "environments/env_doesnotexist", {"orgSlug": "{org}"}, None),
    ("PATCH", "environments/env_doesnotexist", {}, {"orgSlug": "{org}", "description": "x"}),
    ("DELETE", "environments/env_doesnotexist", {"orgSlug": "{org}"}, None),
    ("POST", "environments/secrets", {}, {"orgSlug": "{org}", "name": "MATRIX", "value": "v"}),
    ("GET", "environments/secrets", {"orgSlug": "{org}"}, None),
    ("DELETE", "environments/secrets/sec_doesnotexist", {"orgSlug": "{org}"}, None),
    ("POST", "tools", {}, {"orgSlug": "{org}", "name": "Matrix", "toolKey": "matrix"}),
    ("GET", "tools", {"orgSlug": "{org}"}, None),
    ("GET", "tools/tool_doesnotexist", {}, None),
    ("PATCH", "tools/tool_doesnotexist", {}, {"name": "x"}),
    ("DELETE", "tools/tool_doesnotexist", {}, None),
    ("GET", "agents/tool-deployment-records", {"orgSlug": "{org}"}, None),
    ("POST", "providers", {}, {"orgSlug": "{org}", "name": "M", "kind": "openai", "apiKey": "sk-m"}),
    ("GET", "providers", {"orgSlug": "{org}"}, None),
    ("GET", "providers/system", {}, None),
    ("GET", "providers/prov_doesnotexist", {"orgSlug": "{org}"}, None),
    ("PATCH", "providers/prov_doesnotexist", {}, {"orgSlug": "{org}", "name": "x"}),
    ("DELETE", "providers/prov_doesnotexist", {"orgSlug": "{org}"}, None),
    ("POST", "providers/prov_doesnotexist/test", {}, {"orgSlug": "{org}"}),
    ("POST", "governance/policies/generate-prompt", {}, {"orgSlug": "{org}", "instructions": "No secrets."}),
    ("POST", "governance/policies", {}, {"orgSlug": "{org}", "name": "Matrix", "ruleText": "1. MUST work."}),
    ("GET", "governance/policies", {"orgSlug": "{org}"}, None),
    ("GET", "governance/policies/pol_doesnotexist", {"orgSlug": "{org}"}, None),
    ("PATCH", "governance/policies/pol_doesnotexist", {}, {"orgSlug": "{org}", "ruleText": "x"}),
    ("DELETE", "governance/policies/pol_doesnotexist", {"orgSlug": "{org}"}, None),
    ("POST", "agents", {}, {"orgSlug": "{org}", "stableKey": "matrix", "provider": "openai"}),
    ("POST", "agents/list", {}, {"orgSlug": "{org}"}),
    ("GET", "agents/doesnotexist", {"orgSlug": "{org}"}, None),
    ("PATCH", "agents/doesnotexist", {}, {"orgSlug": "{org}", "name": "x"}),
    ("DELETE", "agents/doesnotexist", {"orgSlug": "{org}"}, None),
    ("POST", "agents/doesnotexist/versions", {}, {"orgSlug": "{org}"}),
    ("GET", "agents/doesnotexist/versions", {"orgSlug": "{org}"}, None),
    ("GET", "agents/doesnotexist/versions/1", {"orgSlug": "{org}"}, None),
    ("POST", "fleets", {}, {"orgSlug": "{org}", "name": "Matrix"}),
    ("GET", "fleets", {"orgSlug": "{org}"}, None),
    ("GET", "fleets/fleet_doesnotexist", {"orgSlug": "{org}"}, None),
    ("PATCH", "fleets/fleet_doesnotexist", {}, {"orgSlug": "{org}", "name": "x"}),
    ("DELETE", "fleets/fleet_doesnotexist", {"orgSlug": "{org}"}, None),
    ("GET", "agents/deployment-jobs", {"orgSlug": "{org}"}, None),
    ("GET", "agents/deployment-jobs/job_doesnotexist", {"orgSlug": "{org}"}, None),
    ("GET", "agents/deployments/heatmap", {"orgSlug": "{org}", "groupBy": "weekday_hour"}, None),
    ("GET", "agents/deployments/metrics", {"orgSlug": "{org}", "period": "day"}, None),
    ("GET", "agents/deployments/history", {"orgSlug": "{org}", "status": "error"}, None),
    ("GET", "agents/deployments/status", {"orgSlug": "{org}", "state": "drifted"}, None),
    ("GET", "agents/deployments/settings", {"orgSlug": "{org}"}, None),
    ("PUT", "agents/deployments/settings", {}, {"orgSlug": "{org}", "staleAfterDays": 7}),
    ("POST", "fleets/fleet_doesnotexist/deploy", {}, {"orgSlug": "{org}", "environmentId": "env_x"}),
    (
        "POST",
        "notifications/channels",
        {},
        {"orgSlug": "{org}", "name": "Matrix", "kind": "webhook", "config": {"url": "https://example.com/h"}},
    ),
    ("GET", "notifications/channels", {"orgSlug": "{org}"}, None),
    ("DELETE", "notifications/channels/ch_doesnotexist", {"orgSlug": "{org}"}, None),
    ("POST", "notifications/channels/ch_doesnotexist/test", {}, {"orgSlug": "{org}"}),
    (
        "POST",
        "notifications/subscriptions/subscribe",
        {},
        {"orgSlug": "{org}", "channelId": "ch_doesnotexist", "eventType": "agent.error"},
    ),
    (
        "POST",
        "notifications/subscriptions/unsubscribe",
        {},
        {"orgSlug": "{org}", "channelId": "ch_doesnotexist", "eventType": "agent.error"},
    ),
    ("GET", "notifications/subscriptions", {"orgSlug": "{org}"}, None),
    ("GET", "notifications/logs", {"orgSlug": "{org}", "pagination[limit]": "5"}, None),
    ("GET", "notifications/logs/stats", {"orgSlug": "{org}", "days": "7"}, None),
]
ROUTE_IDS = [f"{method} {path}" for method, path, _, _ in ROUTES]


def _fill(value: Any, slug: str) -> Any:
    if isinstance(value, dict):
        return {k: _fill(v, slug) for k, v in value.items()}
    return value.replace("{org}", slug) if isinstance(value, str) else value


def call(http: httpx.Client, route: tuple, slug: str, headers: dict[str, str]) -> httpx.Response:
    method, path, query, body = route
    return http.request(method, path, params=_fill(query, slug), json=_fill(body, slug), headers=headers)


@pytest.fixture
def revoked_key(server, org: Org) -> str:
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as client:
        doomed = client.api_keys.create("doomed")
        client.api_keys.revoke(doomed.id)
    return doomed.key


BAD_CREDENTIALS = {
    "no key": {},
    "empty key": {"X-API-Key": ""},
    "malformed key": {"X-API-Key": "not-a-key"},
    "bad checksum": {"X-API-Key": generate_key()[:-1] + "0"},
    "unknown key": {"X-API-Key": generate_key()},
    "basic auth": {"Authorization": "Basic dXNlcjpwYXNz"},
    "bearer without token": {"Authorization": "Bearer"},
}


@pytest.mark.parametrize("route", ROUTES, ids=ROUTE_IDS)
@pytest.mark.parametrize("credentials", list(BAD_CREDENTIALS), ids=list(BAD_CREDENTIALS))
def test_bad_credentials_get_401_with_challenge(http, org, route, credentials):
    response = call(http, route, org.slug, BAD_CREDENTIALS[credentials])
    assert response.status_code == 401, response.text
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert response.json()["message"]
    assert response.json()["code"] == "unauthorized"


@pytest.mark.parametrize("route", ROUTES, ids=ROUTE_IDS)
def test_revoked_key_gets_401(http, org, revoked_key, route):
    response = call(http, route, org.slug, {"X-API-Key": revoked_key})
    assert response.status_code == 401
    assert "revoked" in response.json()["message"]


@pytest.mark.parametrize("route", [r for r in ROUTES if "{org}" in str(r)], ids=lambda r: f"{r[0]} {r[1]}")
def test_other_orgs_key_gets_403(http, org, other_org, route):
    response = call(http, route, org.slug, other_org.headers)
    assert response.status_code == 403, response.text
    assert response.json()["code"] == "forbidden"
    assert org.slug in response.json()["message"]


@pytest.mark.parametrize("route", ROUTES, ids=ROUTE_IDS)
@pytest.mark.parametrize("header", ["x-api-key", "bearer"])
def test_valid_key_is_accepted_in_either_header(http, org, route, header):
    headers = {"X-API-Key": org.key} if header == "x-api-key" else {"Authorization": f"Bearer {org.key}"}
    response = call(http, route, org.slug, headers)
    # Routes naming a resource that does not exist (in the path or the body): authenticated, then not found.
    expected = 404 if "doesnotexist" in str(route) else 200
    assert response.status_code == expected, response.text


def test_x_api_key_wins_over_bearer(http, org):
    wins = http.get("whoami", headers={"X-API-Key": org.key, "Authorization": f"Bearer {generate_key()}"})
    assert wins.status_code == 200
    loses = http.get("whoami", headers={"X-API-Key": generate_key(), "Authorization": f"Bearer {org.key}"})
    assert loses.status_code == 401


def test_bearer_scheme_is_case_insensitive(http, org):
    assert http.get("whoami", headers={"Authorization": f"bearer {org.key}"}).status_code == 200


def test_health_needs_no_key(http):
    response = http.get("health")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "database": "ok", "version": response.json()["version"]}


def test_openapi_and_docs_need_no_key(http):
    schema = http.get("openapi.json").json()
    assert "/api/api-keys" in schema["paths"]
    assert "422" not in str(schema["paths"])  # validation failures are documented as 400
    assert http.get("docs").status_code == 200

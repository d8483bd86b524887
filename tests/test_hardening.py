"""Input no database stores and no client means: refused at the door with a 400 naming where.

Integers past a 32-bit column, NUL characters and lone surrogates in any text, numbers JSON does not
have, bodies that are not UTF-8 or nest without end, text where a number belongs, cursors no page
handed out. Each answer is a 400 (never a 500, never a dropped connection) and changes nothing.
"""

from __future__ import annotations

import json
import os
import stat

import pytest

from tests.conftest import count_rows

TOO_BIG = "9223372036854775808"  # 2^63: past every integer column
PAST_INT32 = "2147483648"  # 2^31: past PostgreSQL's integer

LISTS_WITH_OFFSET = [
    "registries",
    "environments/secrets",
    "tools",
    "agents/tool-deployment-records",
    "governance/policies",
    "agents/deployments/history",
    "agents/deployments/status",
    "fleets",
]


def assert_refused(response, field: str, code: str = "invalid_request") -> dict:
    assert response.status_code == 400, response.text
    error = response.json()
    assert error["code"] == code, error
    assert field in error["message"], error
    assert any(detail["field"] == field for detail in error["details"]), error
    return error


@pytest.mark.parametrize("offset", [TOO_BIG, PAST_INT32])
@pytest.mark.parametrize("path", LISTS_WITH_OFFSET)
def test_an_offset_past_32_bits_is_refused(http, org, path, offset):
    response = http.get(path, params={"orgSlug": org.slug, "offset": offset}, headers=org.headers)
    error = assert_refused(response, "offset")
    assert "2147483647" in error["message"]
    # The connection is kept: the next request on it is answered normally.
    assert http.get(path, params={"orgSlug": org.slug}, headers=org.headers).status_code == 200


@pytest.mark.parametrize("path", ["registries", "agents/deployments/status", "agents/deployments/history"])
def test_the_largest_offset_is_an_empty_page(http, org, path):
    response = http.get(path, params={"orgSlug": org.slug, "offset": "2147483647"}, headers=org.headers)
    assert response.status_code == 200, response.text


def test_offsets_in_list_bodies_and_nested_pages_are_bounded(http, org, client):
    for path in ("agents/list", "environments/list"):
        response = http.post(path, json={"orgSlug": org.slug, "offset": int(TOO_BIG)}, headers=org.headers)
        assert_refused(response, "offset")
    client.agents.create("base-agent", provider="openai")
    versions = http.get(
        "agents/base-agent/versions", params={"orgSlug": org.slug, "offset": TOO_BIG}, headers=org.headers
    )
    assert_refused(versions, "offset")
    logs = http.get(
        "notifications/logs", params={"orgSlug": org.slug, "pagination[offset]": TOO_BIG}, headers=org.headers
    )
    assert_refused(logs, "pagination.offset")


def test_a_version_number_past_32_bits_is_refused(http, org, client):
    client.agents.create("base-agent", provider="openai")
    response = http.get(
        "agents/base-agent/versions/99999999999999999999999",
        params={"orgSlug": org.slug},
        headers=org.headers,
    )
    assert_refused(response, "version")
    body = {
        "orgSlug": org.slug,
        "environmentId": "env_x",
        "agentStableKeys": ["base-agent"],
        "agentVersions": {"base-agent": int(TOO_BIG)},
    }
    assert_refused(
        http.post("agents/deployments/preview", json=body, headers=org.headers), "agentVersions.base-agent"
    )


def test_nul_in_a_body_field_is_refused_and_nothing_is_written(http, db, org):
    before = count_rows(db, "governance_policies")
    body = {"orgSlug": org.slug, "name": "no-nul", "ruleText": "x\u0000y"}
    error = assert_refused(http.post("governance/policies", json=body, headers=org.headers), "ruleText")
    assert "NUL" in error["message"]
    assert count_rows(db, "governance_policies") == before


def test_nul_deep_inside_a_free_form_object_or_a_key_is_refused(http, org):
    nested = {
        "orgSlug": org.slug,
        "stableKey": "nul-agent",
        "provider": "openai",
        "providerConfig": {"a": [1, "x\u0000"]},
    }
    assert_refused(http.post("agents", json=nested, headers=org.headers), "providerConfig.a.1")
    in_key = {
        "orgSlug": org.slug,
        "stableKey": "nul-agent",
        "provider": "openai",
        "providerConfig": {"k\u0000": 1},
    }
    response = http.post("agents", json=in_key, headers=org.headers)
    assert response.status_code == 400 and "NUL" in response.json()["message"]
    assert http.get("agents/nul-agent", params={"orgSlug": org.slug}, headers=org.headers).status_code == 404


def test_a_lone_surrogate_is_refused(http, org):
    raw = b'{"orgSlug": "%s", "name": "bad \\ud800 name"}' % org.slug.encode()
    response = http.post("api-keys", content=raw, headers={**org.headers, "Content-Type": "application/json"})
    error = assert_refused(response, "name")
    assert "surrogate" in error["message"]


def test_nul_in_the_path_or_the_query_is_refused(http, org):
    assert_refused(
        http.get("agents/base-agent%00", params={"orgSlug": org.slug}, headers=org.headers), "path"
    )
    query = http.get(
        "agents/deployment-jobs",
        params={"orgSlug": org.slug, "environmentId": "env\x00"},
        headers=org.headers,
    )
    assert_refused(query, "environmentId")


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_numbers_json_does_not_have_are_refused(http, db, org, number):
    before = count_rows(db, "agents")
    raw = '{"orgSlug": "%s", "stableKey": "nan-agent", "provider": "openai", "providerConfig": {"temperature": %s}}'
    response = http.post(
        "agents",
        content=raw % (org.slug, number),
        headers={**org.headers, "Content-Type": "application/json"},
    )
    assert_refused(response, "providerConfig.temperature", code="malformed_json")
    assert count_rows(db, "agents") == before


# An integer past a double's range; one of 5000 digits is also past the 4300 Python reads as an int.
HUGE_INTEGERS = ["9" * 400, "-" + "9" * 5000]
# (path, the body's fields with NUMBER in one, that field, the table a create writes)
BODIES_WITH_A_NUMBER = [
    (
        "agents",
        '"stableKey": "big", "provider": "openai", "providerConfig": {"maxTokens": NUMBER}',
        "providerConfig.maxTokens",
        "agents",
    ),
    ("environments", '"name": "big", "description": NUMBER', "description", "environments"),
    ("api-keys", '"name": NUMBER, "role": "viewer"', "name", "api_keys"),
]


@pytest.mark.parametrize("number", HUGE_INTEGERS, ids=["400-digits", "5000-digits"])
@pytest.mark.parametrize(
    ("path", "fields", "field", "table"),
    BODIES_WITH_A_NUMBER,
    ids=[path for path, *_ in BODIES_WITH_A_NUMBER],
)
def test_an_integer_beyond_a_doubles_range_is_refused_naming_the_field(
    http, db, org, path, fields, field, table, number
):
    before = count_rows(db, table), count_rows(db, "idempotency_keys")
    raw = f'{{"orgSlug": "{org.slug}", {fields.replace("NUMBER", number)}}}'
    headers = {**org.headers, "Content-Type": "application/json", "Idempotency-Key": f"big-{path}"}
    error = assert_refused(http.post(path, content=raw, headers=headers), field, code="malformed_json")
    assert "beyond a double's range" in error["message"]
    assert (count_rows(db, table), count_rows(db, "idempotency_keys")) == before


def test_a_huge_integer_before_a_syntax_error_is_malformed_json(http, org):
    """The guard leaves a syntax error to the route's parser, which must read the number first."""
    raw = f'{{"orgSlug": "{org.slug}", "name": {"9" * 5000},'
    headers = {**org.headers, "Content-Type": "application/json", "Idempotency-Key": "broken"}
    response = http.post("api-keys", content=raw, headers=headers)
    assert response.status_code == 400, response.text
    assert response.json()["code"] == "malformed_json"


def test_a_body_a_fingerprint_cannot_read_is_refused_for_its_content_type(http, org):
    """A body sent as text is not the guard's to read, but the Idempotency-Key's fingerprint reads it."""
    raw = "[" * 100_000 + "]" * 100_000
    headers = {**org.headers, "Content-Type": "text/plain", "Idempotency-Key": "deep-text"}
    response = http.post("api-keys", content=raw, headers=headers)
    assert response.status_code == 400, response.text
    assert response.json()["code"] == "unsupported_content_type"


@pytest.mark.parametrize("value", ["10", True, 10.5])
def test_a_number_field_takes_numbers_only(http, org, value):
    response = http.post("agents/list", json={"orgSlug": org.slug, "limit": value}, headers=org.headers)
    assert_refused(response, "limit")


def test_a_whole_number_may_be_written_with_a_decimal_point(http, org):
    response = http.post("agents/list", json={"orgSlug": org.slug, "limit": 10.0}, headers=org.headers)
    assert response.status_code == 200, response.text
    assert response.json()["limit"] == 10


def test_a_flag_takes_true_or_false_only(http, org):
    body = {"orgSlug": org.slug, "channelId": "ch_x", "eventType": "agent.error", "enabled": "yes"}
    assert_refused(
        http.post("notifications/subscriptions/subscribe", json=body, headers=org.headers), "enabled"
    )


def test_limit_nan_says_it_is_not_a_number(http, org):
    response = http.get(
        "agents/deployment-jobs", params={"orgSlug": org.slug, "limit": "NaN"}, headers=org.headers
    )
    error = assert_refused(response, "limit")
    assert "1000" not in error["message"]
    assert "finite" in error["message"]


@pytest.mark.parametrize("path", ["agents/deployment-jobs", "notifications/logs"])
def test_a_cursor_no_page_handed_out_is_refused(http, org, path):
    response = http.get(path, params={"orgSlug": org.slug, "cursor": "abc"}, headers=org.headers)
    error = assert_refused(response, "cursor")
    assert "nextCursor" in error["message"]


def test_a_body_that_is_not_utf8_is_malformed_json(http, db, org):
    before = count_rows(db, "api_keys")
    raw = b'{"orgSlug": "%s", "name": "caf\xe9"}' % org.slug.encode()
    response = http.post("api-keys", content=raw, headers={**org.headers, "Content-Type": "application/json"})
    assert response.status_code == 400, response.text
    error = response.json()
    assert error["code"] == "malformed_json"
    assert "UTF-8" in error["message"]
    assert count_rows(db, "api_keys") == before


@pytest.mark.parametrize("depth", [100, 100_000])
def test_a_body_nested_without_end_is_malformed_json(http, org, depth):
    nest = "[" * depth + "]" * depth
    raw = f'{{"orgSlug": "{org.slug}", "name": "deep", "x": {nest}}}'
    response = http.post("api-keys", content=raw, headers={**org.headers, "Content-Type": "application/json"})
    assert response.status_code == 400, response.text
    error = response.json()
    assert error["code"] == "malformed_json"
    assert "nested deeper than 64 levels" in error["message"]


def test_documented_codes_only(http, org):
    """Every 400 above carries a code the reference documents; `bad_request` is not one of them."""
    raw = b'{"orgSlug": "\xff"}'
    response = http.post("api-keys", content=raw, headers={**org.headers, "Content-Type": "application/json"})
    assert response.json()["code"] != "bad_request"


def test_a_webhook_url_with_credentials_is_refused(http, db, org):
    before = count_rows(db, "environments")
    body = {
        "orgSlug": org.slug,
        "name": "hooked",
        "target": "webhook",
        "webhookUrl": "https://user:pw@hooks.example.com/x",
    }
    error = assert_refused(http.post("environments", json=body, headers=org.headers), "webhookUrl")
    assert "pw" not in error["message"]
    assert count_rows(db, "environments") == before


def test_a_provider_key_must_travel_in_a_header(http, org):
    body = {"orgSlug": org.slug, "name": "p", "kind": "openai", "apiKey": "sk-ünïcode"}
    error = assert_refused(http.post("providers", json=body, headers=org.headers), "apiKey")
    assert "ünïcode" not in json.dumps(error)


def test_405_allows_what_the_path_takes(http, org):
    response = http.request("OPTIONS", "agents/some-agent", headers=org.headers)
    assert response.status_code == 405
    assert set(response.headers["allow"].split(", ")) == {"GET", "PATCH", "DELETE"}
    listing = http.request("PUT", "environments/list", headers=org.headers)
    assert listing.headers["allow"] == "POST"


def test_the_sqlite_file_and_its_wal_are_private(settings, server, db, org):
    if not db.is_sqlite:
        pytest.skip("a SQLite file only")
    database = db.engine.url.database
    for path in (database, f"{database}-wal", f"{database}-shm"):
        assert os.path.exists(path), path
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600, path


def test_a_parameter_given_twice_is_refused_unless_it_is_a_list(http, org):
    twice = http.get(f"fleets?orgSlug={org.slug}&orgSlug=other", headers=org.headers)
    error = assert_refused(twice, "orgSlug")
    assert "more than once" in error["message"]
    listed = http.get(
        f"agents/deployment-jobs?orgSlug={org.slug}&status=error&status=partial", headers=org.headers
    )
    assert listed.status_code == 200, listed.text


def test_a_moment_is_written_as_rfc3339(http, org):
    response = http.get("notifications/logs", params={"orgSlug": org.slug, "end": "6"}, headers=org.headers)
    error = assert_refused(response, "dateRange.end")
    assert "RFC 3339" in error["message"]


DAY_FILTERS = [
    (path, name, name)
    for path in (
        "agents/deployment-jobs",
        "agents/deployments/history",
        "agents/deployments/heatmap",
        "agents/deployments/metrics",
    )
    for name in ("start", "end")
]
MOMENT_FILTERS = [
    (path, name, f"dateRange.{member}")
    for path in (
        "audit-events",
        "audit-events/stats",
        "audit-events/export",
        "notifications/logs",
        "notifications/deliveries",
    )
    for member in ("start", "end")
    for name in (f"dateRange[{member}]", f"dateRange.{member}", member)
]
# The calendar's edges, where adding a day or converting to UTC overflows, and the days before 1970.
DAY_EDGES = ["9999-12-31", "0001-01-01", "0001-01-01T00:00:00+14:00", "1969-12-31"]
MOMENT_EDGES = [
    "0001-01-01T00:00:00+14:00",
    "0001-01-01T00:00:00Z",
    "9999-12-31T23:59:59-14:00",
    "9999-12-31T23:59:59.999999Z",
    "1970-01-01T00:30:00+01:00",
]
EDGE_CASES = [
    *((path, name, field, value) for path, name, field in DAY_FILTERS for value in DAY_EDGES),
    *((path, name, field, value) for path, name, field in MOMENT_FILTERS for value in MOMENT_EDGES),
]


@pytest.mark.parametrize(("path", "name", "field", "value"), EDGE_CASES)
def test_a_date_or_moment_beyond_the_calendars_range_is_refused_naming_the_parameter(
    http, org, path, name, field, value
):
    response = http.get(path, params={"orgSlug": org.slug, name: value}, headers=org.headers)
    error = assert_refused(response, field)
    assert "1970-01-01 to 9998-12-31" in error["message"]


@pytest.mark.parametrize("field", ["since", "until"])
@pytest.mark.parametrize("value", MOMENT_EDGES)
def test_a_moment_in_a_body_beyond_the_calendars_range_is_refused(http, org, client, field, value):
    channel = client.notifications.create_channel("hook", "webhook", url="https://hooks.example.com/h")
    body = {"orgSlug": org.slug, "since": "2026-01-01T00:00:00Z", field: value}
    response = http.post(f"notifications/channels/{channel.id}/recover", json=body, headers=org.headers)
    assert_refused(response, field)


@pytest.mark.parametrize("value", MOMENT_EDGES)
def test_an_exceptions_expiry_beyond_the_calendars_range_is_refused(http, org, client, value):
    policy = client.policies.create("Edge", "Anything.", severity="warning")
    body = {"orgSlug": org.slug, "policyId": policy.id, "environmentName": "prod", "reason": "r"}
    body["expiresAt"] = value
    assert_refused(http.post("governance/exceptions", json=body, headers=org.headers), "expiresAt")


def test_every_date_and_moment_the_service_takes_is_bounded_and_in_the_cases_above(http, org):
    """Read from the live document: a date or moment added to any route's query or body must join
    the cases above, or this fails."""
    document = http.get("openapi.json").json()
    taken = set()
    for path, item in document["paths"].items():
        for operation in item.values():
            for parameter in operation.get("parameters", []):
                names = _dated(document, parameter["schema"], parameter["name"], set())
                taken.update((path.removeprefix("/api/"), name) for name in names)
            for content in operation.get("requestBody", {}).get("content", {}).values():
                names = _dated(document, content["schema"], "", set())
                taken.update((path.removeprefix("/api/"), name) for name in names)
    fields = {(path, name): field for path, name, field in DAY_FILTERS + MOMENT_FILTERS}
    bodies = {("notifications/channels/{channelId}/recover", name) for name in ("since", "until")}
    bodies.add(("governance/exceptions", "expiresAt"))
    assert taken == {(path, name) for path, name in fields if "." not in name} | bodies
    for path, name in taken - bodies:
        edge = {"orgSlug": org.slug, name: "0001-01-01T00:00:00+14:00"}
        assert_refused(http.get(path, params=edge, headers=org.headers), fields[(path, name)])


def _dated(document: dict, schema: dict, where: str, seen: set[str]) -> set[str]:
    """The names of the dates and moments in a schema: `where`, `where[member]`, or a body's fields."""
    if "$ref" in schema:
        if schema["$ref"] in seen:
            return set()
        seen = seen | {schema["$ref"]}
        schema = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    names = {where} if schema.get("format") in {"date", "date-time"} else set()
    items = [schema["items"]] if "items" in schema else []
    for option in [*schema.get("anyOf", []), *schema.get("allOf", []), *items]:
        names |= _dated(document, option, where, seen)
    for member, member_schema in schema.get("properties", {}).items():
        names |= _dated(document, member_schema, f"{where}[{member}]" if where else member, seen)
    return names

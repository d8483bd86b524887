"""Error shapes: 400 names the field, 413, 404, 405, 500, and failing requests change nothing."""

from __future__ import annotations

import httpx
import pytest

from service.runtime.server import ServerThread
from tests.conftest import count_rows, make_settings

BAD_BODIES = {
    "unknown field": ({"orgSlug": "{org}", "name": "x", "color": "red"}, "color"),
    "wrong type": ({"orgSlug": "{org}", "name": 42}, "name"),
    "missing field": ({"orgSlug": "{org}"}, "name"),
    "empty name": ({"orgSlug": "{org}", "name": "   "}, "name"),
    "bad slug": ({"orgSlug": "Not A Slug", "name": "x"}, "orgSlug"),
    "null field": ({"orgSlug": "{org}", "name": None}, "name"),
    "name too long": ({"orgSlug": "{org}", "name": "x" * 201}, "name"),
}


@pytest.mark.parametrize("case", list(BAD_BODIES), ids=list(BAD_BODIES))
def test_invalid_body_is_400_naming_the_field_and_writes_nothing(http, db, org, case):
    body, field = BAD_BODIES[case]
    body = {k: v.replace("{org}", org.slug) if isinstance(v, str) else v for k, v in body.items()}
    before = count_rows(db, "api_keys")
    response = http.post("api-keys", json=body, headers=org.headers)
    assert response.status_code == 400, response.text
    error = response.json()
    assert error["code"] == "invalid_request"
    assert field in error["message"]
    assert any(detail["field"] == field for detail in error["details"])
    assert count_rows(db, "api_keys") == before


RAW_BODIES = {
    "malformed JSON": (b'{"orgSlug": "x",', "application/json", "malformed_json"),
    "JSON array": (b"[1, 2]", "application/json", "invalid_request"),
    "no body": (b"", "application/json", "invalid_request"),
    "form body": (b"orgSlug=x&name=y", "application/x-www-form-urlencoded", "unsupported_content_type"),
}


@pytest.mark.parametrize("case", list(RAW_BODIES), ids=list(RAW_BODIES))
def test_unparseable_body_is_400(http, db, org, case):
    content, content_type, code = RAW_BODIES[case]
    before = count_rows(db, "api_keys")
    response = http.post("api-keys", content=content, headers={**org.headers, "Content-Type": content_type})
    assert response.status_code == 400, response.text
    assert response.json()["code"] == code
    assert response.json()["message"]
    assert count_rows(db, "api_keys") == before


def test_query_parameter_errors_name_the_parameter(http, org):
    missing = http.get("api-keys", headers=org.headers)
    assert missing.status_code == 400
    assert "orgSlug" in missing.json()["message"]
    malformed = http.get("api-keys", params={"orgSlug": "UPPER CASE"}, headers=org.headers)
    assert malformed.status_code == 400
    assert "orgSlug" in malformed.json()["message"]


def test_body_over_the_limit_is_413(http, db, org):
    before = count_rows(db, "api_keys")
    body = {"orgSlug": org.slug, "name": "x" * (2 * 1024 * 1024)}
    response = http.post("api-keys", json=body, headers=org.headers)
    assert response.status_code == 413
    assert response.json()["code"] == "payload_too_large"
    assert count_rows(db, "api_keys") == before


def test_streamed_body_over_the_limit_is_413(http, org):
    def chunks():
        for _ in range(40):
            yield b"x" * 65536

    response = http.post(
        "api-keys", content=chunks(), headers={**org.headers, "Content-Type": "application/json"}
    )
    assert response.status_code == 413


def test_unknown_route_is_json_404(http):
    response = http.get("no-such-thing")
    assert response.status_code == 404
    assert response.json() == {
        "message": "No such endpoint: GET /api/no-such-thing",
        "code": "not_found",
        "details": [],
    }


def test_wrong_method_is_json_405(http, org):
    response = http.put("api-keys", headers=org.headers)
    assert response.status_code == 405
    assert response.json()["code"] == "method_not_allowed"


def test_unexpected_failure_is_500_without_a_trace(tmp_path, database_url, db):
    server = ServerThread(make_settings(tmp_path, database_url))

    def explode() -> None:
        raise RuntimeError("secret internals at /srv/orgdeck/service.py line 12")

    server.app.add_api_route("/api/explode", explode)
    server.start()
    try:
        response = httpx.get(server.url + "/explode")
    finally:
        server.stop()
    assert response.status_code == 500
    assert response.json()["code"] == "internal_error"
    assert response.json()["message"]
    assert "secret internals" not in response.text
    assert "Traceback" not in response.text

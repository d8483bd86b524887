"""A release: one version everywhere (/api/health, `orgdeck --version`, the changelog; the installed
package: tests/test_orgdeck_cli.py); the OpenAPI document as generated clients read it; the API's
documents served without a CDN."""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Any

import httpx
import pytest

from api.version import VERSION
from tests.processes import ROOT


def test_orgdeck_version():
    result = subprocess.run(
        [sys.executable, "-m", "api", "--version"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"orgdeck {VERSION}"


def test_the_service_answers_its_version(http):
    assert http.get("health").json()["version"] == VERSION
    assert http.get("openapi.json").json()["info"]["version"] == VERSION


def test_the_changelog_has_the_release_and_an_unreleased_section():
    changelog = (ROOT / "CHANGELOG.md").read_text()
    releases = re.findall(r"^## \[([^\]]+)\]", changelog, re.MULTILINE)
    assert releases[:2] == ["Unreleased", VERSION]


@pytest.fixture(scope="module")
def document(server) -> dict[str, Any]:
    return httpx.get(f"{server.url}/openapi.json", timeout=60).json()


def timestamp_schemas(document: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every property that holds a moment (`…At`, `since`, `until`), by where it is."""
    found = []
    for model, schema in document["components"]["schemas"].items():
        for name, prop in schema.get("properties", {}).items():
            if name.endswith("At") or name in {"since", "until"}:
                found.append((f"{model}.{name}", prop))
    return found


def test_every_timestamp_is_a_date_time(document):
    found = timestamp_schemas(document)
    assert len(found) > 50
    for where, prop in found:
        formats = {
            option.get("format") for option in prop.get("anyOf", [prop]) if option.get("type") != "null"
        }
        assert formats == {"date-time"}, (where, prop)


def test_path_parameters_are_camel_case(document):
    names = {name for path in document["paths"] for name in re.findall(r"\{([^}]+)\}", path)}
    assert {"channelId", "environmentId", "jobId", "stableKey"} <= names
    assert [name for name in names if not re.fullmatch(r"[a-z]+(?:[A-Z][a-z]+)*", name)] == []


@pytest.mark.parametrize("page", ["docs", "redoc"])
def test_the_api_documents_load_nothing_from_elsewhere(server, page):
    root = server.url.removesuffix("/api")
    html = httpx.get(f"{server.url}/{page}", timeout=30).text
    referenced = re.findall(r"""(?:src|href)=["']([^"']+)["']""", html) + re.findall(
        r"""(?:url|spec-url)\s*[:=]\s*["']([^"']+)["']""", html
    )
    assert referenced, html
    assert not [url for url in referenced if "//" in url], referenced
    assert not re.search(r"https?://(?!127\.0\.0\.1|localhost)", html)
    for url in referenced:
        assert httpx.get(root + url, timeout=30).status_code == 200, url

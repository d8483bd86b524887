"""The command line: create-org, migrate, serve, and the first-run story of a fresh install."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import httpx
import pytest

from tests.conftest import SESSION_ENCRYPTION_KEY
from tests.processes import ROOT, serving


def run_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "service", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def cli_env(tmp_path, database_url, db) -> dict[str, str]:
    return {
        **os.environ,
        "ORGDECK_DATA_DIR": str(tmp_path),
        "ORGDECK_DATABASE_URL": database_url,
        "ORGDECK_ENCRYPTION_KEYS": SESSION_ENCRYPTION_KEY,
    }


@pytest.mark.parametrize("command", [[], ["serve"], ["worker"], ["migrate"], ["create-org"]])
def test_help(command, cli_env):
    result = run_cli(*command, "--help", env=cli_env)
    assert result.returncode == 0
    assert "usage: python -m service" in result.stdout


def test_create_org_prints_one_json_line_then_refuses_a_duplicate(cli_env):
    result = run_cli("create-org", "cli-acme", "--name", "Acme", "--key-name", "bootstrap", env=cli_env)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1
    created = json.loads(lines[0])
    assert created["orgSlug"] == "cli-acme"
    assert created["apiKey"].startswith("odk_")
    again = run_cli("create-org", "cli-acme", env=cli_env)
    assert again.returncode == 1
    assert "already exists" in again.stderr
    bad = run_cli("create-org", "Not_A_Slug", env=cli_env)
    assert bad.returncode == 1
    assert "not a valid slug" in bad.stderr


def test_migrate_is_idempotent(cli_env):
    assert run_cli("migrate", env=cli_env).returncode == 0
    assert run_cli("migrate", env=cli_env).returncode == 0


def test_serve_answers_the_first_run_story(cli_env):
    acme = json.loads(run_cli("create-org", "cli-serve-acme", env=cli_env).stdout)
    other = json.loads(run_cli("create-org", "cli-serve-other", env=cli_env).stdout)
    with serving(cli_env) as base:
        query = {"orgSlug": "cli-serve-acme"}
        assert (
            httpx.get(base + "/api-keys", params=query, headers={"X-API-Key": acme["apiKey"]}).status_code
            == 200
        )
        assert httpx.get(base + "/api-keys", params=query).status_code == 401
        assert (
            httpx.get(base + "/api-keys", params=query, headers={"X-API-Key": other["apiKey"]}).status_code
            == 403
        )
        bad = httpx.post(
            base + "/api-keys", json={"orgSlug": "cli-serve-acme"}, headers={"X-API-Key": acme["apiKey"]}
        )
        assert bad.status_code == 400

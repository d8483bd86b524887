"""`python -m service backup` and `restore`: a backup of a live SQLite service taken under writes,
restored into a new data directory, serves the same data with the same encryption keys; PostgreSQL
is pointed to its own tools."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import uuid
from contextlib import closing
from pathlib import Path

import httpx
import pytest
from cryptography.fernet import Fernet
from sqlalchemy import select

from service.environments.models import SecretRow
from service.storage.crypto import Cipher
from service.storage.db import Database
from tests.conftest import POSTGRES_URL, wait_for
from tests.processes import ROOT, serving

ENCRYPTION_KEY = Fernet.generate_key().decode()


def environment(data_dir: Path, **more: str) -> dict[str, str]:
    values = {
        **os.environ,
        "ORGDECK_DATA_DIR": str(data_dir),
        "ORGDECK_ENCRYPTION_KEYS": ENCRYPTION_KEY,
        "ORGDECK_RATE_LIMIT": "0",
        **more,
    }
    values.pop("ORGDECK_DATABASE_URL", None)
    return values


def run_service(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "service", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def fleet_names_in(database: Path, org_slug: str) -> set[str]:
    with closing(sqlite3.connect(database)) as connection:
        rows = connection.execute(
            "SELECT f.name FROM fleets f JOIN organizations o ON o.id = f.org_id WHERE o.slug = ?",
            (org_slug,),
        )
        return {name for (name,) in rows}


def served_fleet_names(base: str, headers: dict[str, str]) -> set[str]:
    names: set[str] = set()
    while True:
        params = {"orgSlug": "acme", "limit": 100, "offset": len(names)}
        page = httpx.get(base + "/fleets", params=params, headers=headers)
        assert page.status_code == 200, page.text
        names |= {fleet["name"] for fleet in page.json()["items"]}
        if len(page.json()["items"]) < 100:
            return names


def test_a_backup_under_writes_restores_into_a_new_directory_and_serves_the_same_data(tmp_path):
    live, restored, backup_file = tmp_path / "live", tmp_path / "restored", tmp_path / "orgdeck.backup"
    created = run_service("create-org", "acme", env=environment(live))
    assert created.returncode == 0, created.stderr
    key = json.loads(created.stdout)["apiKey"]
    headers = {"X-API-Key": key}
    answered: list[int] = []
    with serving(environment(live)) as base:
        secret = httpx.post(
            base + "/environments/secrets",
            json={"orgSlug": "acme", "name": "OPENAI_API_KEY", "value": "sk-kept-in-the-backup"},
            headers=headers,
        )
        assert secret.status_code == 200, secret.text
        stop = threading.Event()

        def write() -> None:
            with httpx.Client(headers=headers) as http:
                while not stop.is_set():
                    body = {"orgSlug": "acme", "name": f"fleet-{uuid.uuid4().hex[:8]}"}
                    answered.append(http.post(base + "/fleets", json=body).status_code)

        writer = threading.Thread(target=write)
        writer.start()
        try:
            wait_for(lambda: len(answered) >= 20, timeout=60, what="the first writes")
            taken = run_service("backup", str(backup_file), env=environment(live))
            written_before_backup_ended = len(answered)
        finally:
            stop.set()
            writer.join()
    assert taken.returncode == 0, taken.stderr
    assert set(answered) == {200} and len(answered) > written_before_backup_ended >= 20
    in_backup = fleet_names_in(backup_file, "acme")
    assert 20 <= len(in_backup) <= written_before_backup_ended
    assert len(fleet_names_in(live / "orgdeck.db", "acme")) == len(answered)

    again = run_service("backup", str(backup_file), env=environment(live))
    assert again.returncode == 1 and "never overwrites" in again.stderr

    done = run_service("restore", str(backup_file), env=environment(restored))
    assert done.returncode == 0, done.stderr
    refused = run_service("restore", str(backup_file), env=environment(restored))
    assert refused.returncode == 1 and "--force" in refused.stderr
    forced = run_service("restore", str(backup_file), "--force", env=environment(restored))
    assert forced.returncode == 0, forced.stderr

    with serving(environment(restored)) as base:
        assert served_fleet_names(base, headers) == in_backup
        secrets = httpx.get(base + "/environments/secrets", params={"orgSlug": "acme"}, headers=headers)
        assert [item["name"] for item in secrets.json()["items"]] == ["OPENAI_API_KEY"]
    database = Database(f"sqlite:///{restored / 'orgdeck.db'}")
    try:
        with database.session() as session:
            ciphertext = session.scalar(
                select(SecretRow.ciphertext).where(SecretRow.name == "OPENAI_API_KEY")
            )
    finally:
        database.dispose()
    assert Cipher([ENCRYPTION_KEY]).decrypt(ciphertext) == "sk-kept-in-the-backup"


def test_a_file_that_is_not_a_backup_is_refused(tmp_path):
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database at all" * 100)
    refused = run_service("restore", str(junk), env=environment(tmp_path / "new"))
    assert refused.returncode == 1 and "not a SQLite database" in refused.stderr
    assert not (tmp_path / "new" / "orgdeck.db").exists()


@pytest.mark.skipif(not POSTGRES_URL, reason="PostgreSQL's tools are for a PostgreSQL database")
def test_postgresql_points_to_pg_dump_and_pg_restore(tmp_path):
    env = {**environment(tmp_path), "ORGDECK_DATABASE_URL": POSTGRES_URL}
    backup = run_service("backup", str(tmp_path / "x"), env=env)
    restore = run_service("restore", str(tmp_path / "x"), env=env)
    assert backup.returncode == restore.returncode == 2
    assert "pg_dump" in backup.stderr and "pg_restore" in restore.stderr
    assert not (tmp_path / "x").exists()

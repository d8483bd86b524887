"""Liveness and readiness as probes see them, and where a database stands against the code's
migrations: `migrate --check`, and `serve` refusing a database a newer release migrated."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from alembic import command
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from api.version import VERSION
from service.runtime.server import ServerThread
from service.settings import Settings
from service.storage.db import Database
from service.storage.migrate import alembic_config, upgrade
from tests.conftest import POSTGRES_URL, SESSION_ENCRYPTION_KEY, make_settings, scratch_database, wait_for
from tests.processes import ROOT

EARLIER_REVISION = "0027_idempotency_callers"


def test_a_serving_process_is_live_and_ready_with_its_worker(http):
    assert http.get("health/live").json() == {"status": "ok"}
    ready = http.get("health/ready")
    assert ready.status_code == 200
    assert ready.json() == {
        "status": "ready",
        "checks": {"database": "ok", "migrations": "ok", "worker": "ok"},
    }
    assert http.get("health").json() == {"status": "ok", "database": "ok", "version": VERSION}


@pytest.fixture
def own_database(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A database of its own (SQLite in a folder of its own), and that folder."""
    folder = tmp_path / "database"
    folder.mkdir()
    with scratch_database(folder) as url:
        yield url, folder


def lose(url: str, folder: Path) -> None:
    """Take the database away from under a running service: its PostgreSQL database dropped (its
    connections ended), or its SQLite file's folder removed."""
    if url.startswith("sqlite"):
        shutil.rmtree(folder)
        return
    name = make_url(url).database
    admin = create_engine(
        Settings(database_url=POSTGRES_URL).resolved_database_url, isolation_level="AUTOCOMMIT"
    )
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))
    admin.dispose()


def test_without_its_database_a_process_is_live_but_not_ready(own_database, tmp_path):
    url, folder = own_database
    db = Database(url)
    upgrade(db)
    db.dispose()
    server = ServerThread(make_settings(tmp_path / "data", url, run_worker=False)).start()
    try:
        with httpx.Client(base_url=server.url + "/", timeout=30) as http:
            assert http.get("health/ready").json()["status"] == "ready"
            lose(url, folder)

            def refused() -> httpx.Response | None:
                answer = http.get("health/ready")
                return answer if answer.status_code == 503 else None

            answer = wait_for(refused, what="readiness to fail")  # checked at most once a second
            assert answer.json() == {
                "status": "not ready",
                "checks": {"database": "unreachable", "migrations": "unknown", "worker": "not running"},
            }
            assert http.get("health/live").status_code == 200
            assert http.get("health").status_code == 503
    finally:
        server.stop()


def service_command(*args: str, url: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "ORGDECK_DATABASE_URL": url,
        "ORGDECK_DATA_DIR": str(data_dir),
        "ORGDECK_ENCRYPTION_KEYS": SESSION_ENCRYPTION_KEY,
    }
    return subprocess.run(
        [sys.executable, "-m", "service", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_migrate_check_on_an_empty_an_old_and_a_current_database(own_database, tmp_path):
    url, _ = own_database
    empty = service_command("migrate", "--check", url=url, data_dir=tmp_path)
    assert empty.returncode == 1 and "behind" in empty.stderr
    db = Database(url)
    try:
        command.upgrade(alembic_config(db), EARLIER_REVISION)
        old = service_command("migrate", "--check", url=url, data_dir=tmp_path)
        assert old.returncode == 1, old.stderr
        assert f"behind: database at {EARLIER_REVISION}" in old.stderr
        assert service_command("migrate", url=url, data_dir=tmp_path).returncode == 0
        current = service_command("migrate", "--check", url=url, data_dir=tmp_path)
        assert current.returncode == 0, current.stderr
        assert "at head" in current.stderr
    finally:
        db.dispose()


def test_a_database_migrated_by_a_newer_release_is_refused(own_database, tmp_path):
    url, _ = own_database
    db = Database(url)
    try:
        upgrade(db)
        with db.engine.begin() as connection:
            connection.execute(text("UPDATE alembic_version SET version_num = '0099_from_a_newer_release'"))
        check = service_command("migrate", "--check", url=url, data_dir=tmp_path)
        assert check.returncode == 1 and "newer than the code" in check.stderr
        served = service_command("serve", "--port", "0", url=url, data_dir=tmp_path)
        assert served.returncode == 1
        assert "migrated by a newer release of Orgdeck" in served.stderr
        assert "0099_from_a_newer_release" in served.stderr
        assert "Traceback" not in served.stderr
        with db.engine.connect() as connection:  # left as it was
            assert connection.execute(text("SELECT version_num FROM alembic_version")).scalar_one() == (
                "0099_from_a_newer_release"
            )
    finally:
        db.dispose()

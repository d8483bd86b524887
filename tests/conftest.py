"""Shared fixtures: one database and one live service per test session, a fresh org per test.

The suite runs on SQLite by default and on PostgreSQL when ORGDECK_TEST_DATABASE_URL is set (each
session gets a database of its own there, dropped at the end). Parts this machine lacks
(PostgreSQL, Redis, Chromium) are skipped with a reason on a laptop and fail the run in CI.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.fernet import Fernet
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError

from api import OrgdeckClient
from service.runtime.bootstrap import create_org_with_key
from service.runtime.server import ServerThread
from service.settings import Settings
from service.storage.db import Database
from service.storage.migrate import upgrade
from tests.oidc_provider import CONSOLE_CLIENT, IdentityProvider, running_provider
from tests.oidc_provider import install as install_oidc_provider
from tests.oidc_provider import missing_part as oidc_provider_missing

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}
POSTGRES_URL = os.environ.get("ORGDECK_TEST_DATABASE_URL", "")
REDIS_URL = os.environ.get("ORGDECK_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
# Every service and worker this session starts on the shared database encrypts under one key, as
# production processes share ORGDECK_ENCRYPTION_KEYS: one with a key of its own (its own data
# directory) could not read what the others stored.
SESSION_ENCRYPTION_KEY = Fernet.generate_key().decode()
MISSING_PART = re.compile(r"(?P<part>[\w ]+?) unavailable: (?P<reason>.*)")


def service_env(data_dir: Path, database_url: str, **extra: str) -> dict[str, str]:
    """This process's environment for a service process of a test's own: its data directory, its
    database, the session's encryption key, and `extra` (ORGDECK_* settings)."""
    return {
        **os.environ,
        "ORGDECK_DATA_DIR": str(data_dir),
        "ORGDECK_DATABASE_URL": database_url,
        "ORGDECK_ENCRYPTION_KEYS": SESSION_ENCRYPTION_KEY,
        **extra,
    }


def require(part: str, reason: str) -> None:
    """Skip a test for a missing part on a laptop; in CI every part must run, so fail instead."""
    if IN_CI:
        pytest.fail(f"{part} is required in CI but unavailable: {reason}", pytrace=False)
    pytest.skip(f"{part} unavailable: {reason}")


# CI decides whether a change lands, so it fuzzes with the same inputs every time: a failure there is
# the change's. Every other run draws a new seed and so explores further.
CI_FUZZ_SEED = 3287341442


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fuzz-examples",
        type=int,
        default=20,
        help="examples per operation in the fuzzing test (default 20; a deep run: 500)",
    )
    parser.addoption(
        "--fuzz-seed",
        type=int,
        default=CI_FUZZ_SEED if IN_CI else None,
        help="replay a fuzzing run by its seed (default: a new one each run; in CI, always the same)",
    )


def pytest_report_header(config: pytest.Config) -> str:
    backend = "PostgreSQL" if POSTGRES_URL else "SQLite"
    return f"orgdeck: database backend {backend}; CI mode {'on' if IN_CI else 'off'}"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not POSTGRES_URL:
        terminalreporter.write_line(
            "orgdeck: ran on SQLite only; set ORGDECK_TEST_DATABASE_URL=postgresql://... to run on PostgreSQL too",
            yellow=True,
        )
    for part, reason in skipped_parts(terminalreporter.stats.get("skipped", [])).items():
        terminalreporter.write_line(f"orgdeck: skipped the tests that need {part}: {reason}", yellow=True)


def skipped_parts(reports: list[pytest.TestReport]) -> dict[str, str]:
    """The missing parts named by `require`, read from the skip reports (which reach the main
    process from every xdist worker, unlike any state kept in the worker that skipped)."""
    parts: dict[str, str] = {}
    for report in reports:
        message = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        found = MISSING_PART.match(message.removeprefix("Skipped: "))
        if found:
            parts.setdefault(found["part"], found["reason"])
    return parts


@dataclass(frozen=True)
class Org:
    slug: str
    key: str

    @property
    def headers(self) -> dict[str, str]:
        return {"X-API-Key": self.key}


@pytest.fixture(scope="session")
def database_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with scratch_database(tmp_path_factory.mktemp("database")) as url:
        yield url


@contextmanager
def scratch_database(folder: Path) -> Iterator[str]:
    """An empty database of its own: a SQLite file in `folder`, or a PostgreSQL database dropped after."""
    if not POSTGRES_URL:
        yield f"sqlite:///{folder / 'orgdeck.db'}"
        return
    name = f"orgdeck_test_{uuid.uuid4().hex[:12]}"
    admin_url = Settings(database_url=POSTGRES_URL).resolved_database_url
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
    except OperationalError as exc:
        admin.dispose()
        require("PostgreSQL", str(exc).splitlines()[0])
    try:
        yield make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(scope="session")
def settings(tmp_path_factory: pytest.TempPathFactory, database_url: str) -> Settings:
    return make_settings(tmp_path_factory.mktemp("data"), database_url)


def make_settings(data_dir: Path, database_url: str, **overrides: object) -> Settings:
    values: dict[str, object] = {
        "data_dir": data_dir,
        "database_url": database_url,
        "rate_limit": 1_000_000,
        "outbound_allow_private": ["*"],
        "encryption_keys": [SESSION_ENCRYPTION_KEY],
        # Tests seed history at fixed past dates: the served worker must not prune it beneath them
        # (tests/test_retention.py sets each retention it checks).
        "retention_notification_logs_days": 0,
        "retention_deliveries_days": 0,
        "retention_job_details_days": 0,
        # A hanging verification webhook fails its wave after this (tests/test_rollouts.py).
        "verification_timeout_seconds": 2,
    }
    values.update(overrides)
    return Settings(**values)


@pytest.fixture(scope="session")
def db(settings: Settings) -> Iterator[Database]:
    database = Database(settings.resolved_database_url)
    upgrade(database)
    yield database
    database.dispose()


@pytest.fixture(scope="session")
def server(settings: Settings, db: Database) -> Iterator[ServerThread]:
    thread = ServerThread(settings).start()
    yield thread
    thread.stop()


def new_org(db: Database) -> Org:
    slug, key = create_org_with_key(db, slug=f"t-{uuid.uuid4().hex[:12]}", name="Test Org", key_name="admin")
    return Org(slug=slug, key=key)


@pytest.fixture
def org(db: Database) -> Org:
    return new_org(db)


@pytest.fixture
def other_org(db: Database) -> Org:
    return new_org(db)


# The longest tests (minutes each, the next ones under a minute) start first: begun last, one of
# them would run alone while every other worker has finished.
LONGEST_FIRST = ("tests/browser/test_tour.py::", "tests/test_fuzz.py::")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: not item.nodeid.startswith(LONGEST_FIRST))


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # once, in the process that starts the workers
        install_oidc_provider()


@pytest.fixture(scope="session")
def identity_provider() -> Iterator[IdentityProvider]:
    """The OpenID Connect provider of the sign-in tests (tests/oidc), once per test session."""
    reason = oidc_provider_missing()
    if reason is not None:
        require("The OpenID Connect provider", reason)
    with running_provider() as provider:
        yield provider


@pytest.fixture(scope="session")
def signin_server(
    tmp_path_factory: pytest.TempPathFactory, database_url: str, db, identity_provider: IdentityProvider
) -> Iterator[ServerThread]:
    """A service that signs people in with the test identity provider (tests/oidc), beside API keys."""
    settings = make_settings(
        tmp_path_factory.mktemp("signin"),
        database_url,
        oidc_issuer=identity_provider.issuer,
        oidc_audience=CONSOLE_CLIENT,
        oidc_clock_skew_seconds=0,
        oidc_jwks_refresh_seconds=0,
    )
    thread = ServerThread(settings).start()
    yield thread
    thread.stop()


@pytest.fixture
def http(server: ServerThread) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url + "/", timeout=30) as client:
        yield client


@pytest.fixture
def client(server: ServerThread, org: Org) -> Iterator[OrgdeckClient]:
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as orgdeck:
        yield orgdeck


def raw_database_contains(database_url: str, needle: str) -> bool:
    """Whether `needle` appears anywhere in the database's raw storage (files or a full dump).

    Read in a child process: closing a file descriptor of the SQLite file in this process would drop
    SQLite's own locks on it (POSIX locks are per process) and corrupt the running service's view.
    """
    if database_url.startswith("sqlite"):
        path = database_url.removeprefix("sqlite:///")
        command = ["sh", "-c", 'cat "$0" "$0"-wal "$0"-shm 2>/dev/null', path]
    else:
        url = make_url(database_url).set(drivername="postgresql").render_as_string(hide_password=False)
        command = ["pg_dump", "--data-only", url]
    dump = subprocess.run(command, capture_output=True, check=False, timeout=120).stdout
    assert dump, f"nothing read from {database_url}"
    return needle.encode() in dump


def wait_for(condition: Callable[[], Any], timeout: float = 15, what: str = "condition") -> Any:
    """Poll until `condition()` is truthy (work done after a response, by a worker) and return it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def count_rows(db: Database, table: str) -> int:
    with db.engine.connect() as connection:
        return connection.execute(text(f"SELECT COUNT(*) FROM {table}")).scalar_one()  # noqa: S608

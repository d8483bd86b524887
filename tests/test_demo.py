"""`python -m service demo`, the console's embedded service, as the console runs it: a process of its
own that seeds the demo organization, says where it serves on one line, and ends when its standard
input closes. On the suite's database (SQLite, or PostgreSQL in the PostgreSQL run), a scratch one."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from api import OrgdeckClient
from tests.conftest import scratch_database, service_env
from tests.processes import ROOT

READY_TIMEOUT_SECONDS = 180


@pytest.fixture(scope="module")
def demo_database(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with scratch_database(tmp_path_factory.mktemp("demo-db")) as url:
        yield url


@contextmanager
def demo_service(data_dir: Path, database_url: str) -> Iterator[tuple[subprocess.Popen[str], dict[str, str]]]:
    """The demo command running, with the line it printed once ready. What it logs goes to
    data_dir/demo.log: a pipe nobody reads while the test runs would fill and stop the service."""
    environment = service_env(data_dir, database_url, ORGDECK_RUN_WORKER="true")
    log = (data_dir / "demo.log").open("a")
    process = subprocess.Popen(
        [sys.executable, "-m", "service", "demo"],
        cwd=ROOT,
        env=environment,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
    )
    try:
        ready = process.stdout.readline()
        assert ready, f"the demo ended before it was ready:\n{(data_dir / 'demo.log').read_text()}"
        yield process, json.loads(ready)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)
        log.close()


def demo_counts(url: str, api_key: str) -> dict[str, int]:
    """What the demo organization holds, as its admin sees it."""
    with OrgdeckClient(url, api_key) as client:
        caller = client.whoami()
        assert (caller.org_slug, caller.role) == ("demo", "admin")
        return {
            "agents": client.agents.list(limit=100).total,
            "members": len(client.members.list().items),
            "environments": len(client.environments.list().items),
            "policies": len(client.policies.list().items),
            "channels": len(client.notifications.list_channels().items),
        }


def test_the_demo_serves_a_filled_organization_and_ends_when_its_input_closes(tmp_path, demo_database):
    with demo_service(tmp_path, demo_database) as (process, ready):
        counts = demo_counts(ready["url"], ready["apiKey"])
        with OrgdeckClient(ready["url"], ready["apiKey"]) as client:
            history = client.deployments.jobs(limit=200).items
        # Its readiness watches the worker it runs, as a served app's does.
        readiness = httpx.get(ready["url"] + "/health/ready", timeout=10).json()
        process.stdin.close()
        assert process.wait(timeout=30) == 0
        errors = (tmp_path / "demo.log").read_text()
    assert counts["agents"] == 12 and counts["members"] >= 8 and counts["environments"] >= 4, counts
    assert counts["policies"] and counts["channels"], counts
    # The quarter behind the present, written directly: jobs that ended days ago.
    assert len(history) == 200 and any(job.status == "error" for job in history)
    assert "Traceback" not in errors, errors
    assert readiness["checks"]["worker"] == "ok", readiness
    assert (tmp_path / "demo-api-key").stat().st_mode & 0o777 == 0o600


def test_a_second_start_reuses_the_key_and_adds_nothing(tmp_path, demo_database):
    with demo_service(tmp_path, demo_database) as (process, first):
        before = demo_counts(first["url"], first["apiKey"])
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    with demo_service(tmp_path, demo_database) as (process, second):
        assert second["apiKey"] == first["apiKey"]
        assert demo_counts(second["url"], second["apiKey"]) == before
        process.stdin.close()
        assert process.wait(timeout=30) == 0

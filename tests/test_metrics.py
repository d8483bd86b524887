"""GET /metrics: what known traffic and work leave in it, by route template; who may read it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from api import OrgdeckClient
from service.deployments.runner import run_deployment_jobs
from service.runtime.server import ServerThread
from service.settings import Settings
from service.storage.db import Database
from service.storage.migrate import upgrade
from tests.conftest import Org, make_settings, new_org, scratch_database, service_env
from tests.processes import serving
from tests.test_deployments import _job_left_running, versioned_agent, wait_for_end


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of a scrape by its name and labels."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def scrape(root: str, **headers: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    answer = httpx.get(f"{root}/metrics", headers=headers, timeout=30)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain")
    return samples(answer.text)


def value(scraped: dict, name: str, **labels: str) -> float:
    return scraped.get((name, frozenset(labels.items())), 0.0)


def root_of(server: ServerThread) -> str:
    return server.url.removesuffix("/api")


def test_requests_are_counted_by_route_template_method_and_status(server, http, org):
    root = root_of(server)
    before = scrape(root)
    for name in ("bot-one", "bot-two", "bot-three"):  # three paths, one route
        assert (
            http.get(f"agents/{name}", params={"orgSlug": org.slug}, headers=org.headers).status_code == 404
        )
    assert http.get("agents/bot-one", params={"orgSlug": org.slug}).status_code == 401
    assert http.get("api-keys", params={"orgSlug": org.slug}, headers=org.headers).status_code == 200
    after = scrape(root)

    def added(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    route = "/api/agents/{stableKey}"
    assert added("orgdeck_http_requests_total", route=route, method="GET", status="404") == 3
    assert added("orgdeck_http_requests_total", route=route, method="GET", status="401") == 1
    assert added("orgdeck_http_requests_total", route="/api/api-keys", method="GET", status="200") == 1
    assert added("orgdeck_http_request_duration_seconds_count", route=route, method="GET") == 4
    assert added("orgdeck_http_request_duration_seconds_bucket", route=route, method="GET", le="+Inf") == 4
    # The first scrape was counted by the time of the second; no raw path is ever a label.
    assert added("orgdeck_http_requests_total", route="/metrics", method="GET", status="200") == 1
    assert not [labels for (_, labels) in after if ("route", "/api/agents/bot-one") in labels]


@pytest.fixture
def idle_service(tmp_path: Path) -> Iterator[tuple[ServerThread, Database, Settings]]:
    """A service of its own, on a database of its own, without a worker: jobs stay where they are."""
    with scratch_database(tmp_path) as url:
        settings = make_settings(tmp_path / "data", url, run_worker=False)
        db = Database(url)
        upgrade(db)
        server = ServerThread(settings).start()
        try:
            yield server, db, settings
        finally:
            server.stop()
            db.dispose()


def test_jobs_in_motion_their_queue_and_lease_takeovers(idle_service):
    server, db, settings = idle_service
    org: Org = new_org(db)
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as client:
        environment = client.environments.create("staging").id
        versioned_agent(client, "alpha")
        before = scrape(root_of(server))
        client.deployments.deploy(environment, ["alpha"])
        client.deployments.deploy(environment, ["alpha"])
        abandoned = _job_left_running(db, org.slug, environment, attempts=1)
        waiting = scrape(root_of(server))
        assert value(waiting, "orgdeck_deployment_jobs", state="pending") == 2
        assert value(waiting, "orgdeck_deployment_jobs", state="running") == 1
        assert value(waiting, "orgdeck_deployment_queue_depth") == 2
        assert value(waiting, "orgdeck_deployment_queue_oldest_age_seconds") >= 0
        assert value(waiting, "orgdeck_db_pool_size") == settings.db_pool_size

        while run_deployment_jobs(db, settings):  # the abandoned job is claimed first (oldest id)
            pass
        assert wait_for_end(client, abandoned).status == "complete"
        done = scrape(root_of(server))
    assert value(done, "orgdeck_deployment_jobs", state="pending") == 0
    assert value(done, "orgdeck_deployment_queue_depth") == 0

    def added(name: str, **labels: str) -> float:
        return value(done, name, **labels) - value(before, name, **labels)

    assert added("orgdeck_lease_takeovers_total", kind="deployment_job") == 1
    assert added("orgdeck_deployment_jobs_ended_total", state="complete") == 3


@pytest.fixture
def keyed_service(db: Database, tmp_path: Path, database_url: str) -> Iterator[ServerThread]:
    settings = make_settings(tmp_path, database_url, run_worker=False, metrics_access="key")
    server = ServerThread(settings).start()
    yield server
    server.stop()


def test_metrics_behind_a_key_admit_any_valid_key_only(keyed_service, db):
    root = root_of(keyed_service)
    refused = httpx.get(f"{root}/metrics")
    assert refused.status_code == 401 and refused.json()["code"] == "unauthorized"
    assert httpx.get(f"{root}/metrics", headers={"X-API-Key": "odk_" + "A" * 38}).status_code == 401
    with OrgdeckClient(keyed_service.url, new_org(db).key) as admin:
        viewer_key = admin.api_keys.create("scraper", role="viewer").key
    assert (
        "orgdeck_http_requests_total" in httpx.get(f"{root}/metrics", headers={"X-API-Key": viewer_key}).text
    )


def test_by_default_a_caller_on_this_host_needs_no_key(server):
    assert httpx.get(f"{root_of(server)}/metrics").status_code == 200


def test_processes_sharing_a_multiprocess_directory_answer_their_sum(tmp_path, database_url, db):
    """Two `serve` processes with one PROMETHEUS_MULTIPROC_DIR: either one's scrape counts both's requests."""
    shared = tmp_path / "prometheus"
    shared.mkdir()
    env = service_env(
        tmp_path, database_url, ORGDECK_RUN_WORKER="false", PROMETHEUS_MULTIPROC_DIR=str(shared)
    )
    with serving(env) as first, serving(env) as second:
        roots = [base.removesuffix("/api") for base in (first, second)]
        for root, times in zip(roots, (2, 3), strict=True):
            for _ in range(times):
                assert httpx.get(f"{root}/api/whoami").status_code == 401
        scraped = scrape(roots[0])
    assert value(scraped, "orgdeck_http_requests_total", route="/api/whoami", method="GET", status="401") == 5

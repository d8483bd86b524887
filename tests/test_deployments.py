"""Deployments: preview diffs, jobs through the worker, webhook targets, leases, listing, isolation."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from sqlalchemy import select
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from api import OrgdeckClient
from api.deployments import FINISHED_JOB_STATUSES, DeploymentJob, DeploymentRequest
from api.errors import BadRequest, NotFound
from service.deployments import service as deployments
from service.deployments.models import DeploymentJobRow as JobRow
from service.deployments.runner import MAX_ATTEMPTS, run_deployment_jobs
from service.events.models import EventRow
from service.orgs.models import OrganizationRow
from service.settings import Settings
from service.storage.db import Database, utcnow
from service.worker import Worker
from tests.conftest import Org, count_rows, raw_database_contains

SECRET_VALUE = "sk-live-" + "q7" * 12
TABLES = ("deployment_jobs", "deployment_job_agents", "agent_deployments", "events")


class WebhookTarget:
    """A deployment target on loopback: verifies signatures and fails the agents it is told to."""

    def __init__(self) -> None:
        self.key = ""
        self.failing: set[str] = set()
        # Why a failing agent failed, in the target's words: given the agent as it was sent.
        self.explain: Callable[[dict[str, Any]], str] = lambda _agent: "refused by the target"
        self.status = 200
        self.delay = 0.0  # seconds before answering, for a slow target
        self.manifests: list[dict[str, Any]] = []
        self.bad_signatures = 0
        target = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                if not target.verified(self.headers, body):
                    target.bad_signatures += 1
                    self.send_response(401)
                    self.end_headers()
                    return
                manifest = json.loads(body)
                target.manifests.append(manifest)
                time.sleep(target.delay)
                results = [
                    {"stableKey": a["stableKey"], "status": "error", "error": target.explain(a)}
                    if a["stableKey"] in target.failing
                    else {"stableKey": a["stableKey"], "status": "complete"}
                    for a in manifest["agents"]
                ]
                answer = json.dumps({"results": results}).encode()
                self.send_response(target.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/deploy"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def verified(self, headers: Any, body: bytes) -> bool:
        """Whether the reference implementation of Standard Webhooks accepts the signature and its time."""
        try:
            Webhook(self.key).verify(body, dict(headers.items()))
        except WebhookVerificationError:
            return False
        return True

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def target() -> Iterator[WebhookTarget]:
    receiver = WebhookTarget()
    yield receiver
    receiver.close()


def versioned_agent(client: OrgdeckClient, stable_key: str, **config: Any) -> None:
    provider_config = {"model": "gpt-4o-mini", "temperature": 0.2, **config}
    client.agents.create(stable_key, "openai", provider_config=provider_config)
    client.agents.snapshot(stable_key)


def wait_for_end(client: OrgdeckClient, job_id: str, timeout: float = 30) -> DeploymentJob:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = client.deployments.job(job_id)
        if job.status in FINISHED_JOB_STATUSES:
            return job
        time.sleep(0.1)
    raise AssertionError(f"job {job_id} did not finish in {timeout} s: {job.model_dump_json()}")


def webhook_environment(client: OrgdeckClient, target: WebhookTarget) -> str:
    environment = client.environments.create(
        f"hook-{uuid.uuid4().hex[:8]}", target="webhook", webhook_url=target.url
    )
    target.key = client.deployments.create_signing_key(environment.id).secret
    return environment.id


def events_of(db: Database, org_slug: str, job_id: str) -> list[tuple[str, dict[str, Any]]]:
    with db.session() as session:
        rows = session.scalars(select(EventRow).order_by(EventRow.occurred_at, EventRow.id))
        return [(row.type, row.payload) for row in rows if row.payload.get("jobId") == job_id]


# -- preview ------------------------------------------------------------------------------


def test_preview_reports_added_changed_unchanged_and_rollback_and_writes_nothing(client, db):
    environment = client.environments.create("staging").id
    versioned_agent(client, "alpha")
    versioned_agent(client, "beta")
    first = wait_for_end(client, client.deployments.deploy(environment, ["alpha", "beta"]).id)
    assert first.status == "complete"
    client.agents.update("alpha", provider_config={"model": "gpt-4o", "maxTokens": 512})
    client.agents.snapshot("alpha")
    versioned_agent(client, "gamma")
    before = {table: count_rows(db, table) for table in TABLES}

    preview = client.deployments.preview(environment, ["alpha", "beta", "gamma"])

    assert {table: count_rows(db, table) for table in TABLES} == before
    assert preview.has_changes
    by_key = {agent.stable_key: agent for agent in preview.agents}
    assert by_key["beta"].status == "unchanged" and by_key["beta"].changes == []
    assert by_key["gamma"].status == "added" and by_key["gamma"].current_version is None
    alpha = by_key["alpha"]
    assert (alpha.status, alpha.current_version, alpha.target_version) == ("changed", 1, 2)
    changes = {(c.field, c.kind): (c.before, c.after) for c in alpha.changes}
    assert changes == {
        ("version", "changed"): (1, 2),
        ("model", "changed"): ("gpt-4o-mini", "gpt-4o"),
        ("providerConfig.model", "changed"): ("gpt-4o-mini", "gpt-4o"),
        ("providerConfig.maxTokens", "added"): (None, 512),
        ("providerConfig.temperature", "removed"): (0.2, None),
    }
    wait_for_end(client, client.deployments.deploy(environment, ["alpha"]).id)
    rollback = client.deployments.preview(environment, ["alpha"], agent_versions={"alpha": 1}).agents[0]
    assert (rollback.status, rollback.current_version, rollback.target_version) == ("changed", 2, 1)
    assert ("version", "changed", 2, 1) in {(c.field, c.kind, c.before, c.after) for c in rollback.changes}
    assert not client.deployments.preview(environment, ["beta"]).has_changes


def test_preview_shows_overrides_field_by_field_and_never_a_secret(client):
    environment = client.environments.create("prod").id
    client.tools.create("Search", "search")
    client.tools.create("Mailer", "mailer")
    prompts = client.registries.create("prompts").registry_ref
    for text in ("Sort.", "Sort tickets.", "Sort tickets by urgency."):
        client.registries.publish(prompts, "triage-system", text)
    client.agents.create(
        "alpha",
        "openai",
        provider_config={"model": "gpt-4o-mini", "temperature": 0.2, "apiKey": SECRET_VALUE},
        prompt_references={"triage-system": f"{prompts}/triage-system@production"},
    )
    client.agents.snapshot("alpha")
    wait_for_end(client, client.deployments.deploy(environment, ["alpha"], tool_refs=["search"]).id)

    preview = client.deployments.preview(
        environment,
        ["alpha"],
        model="gpt-4.1",
        tool_refs=["mailer"],
        prompt_name="triage-system",
        version="3",
        agent_provider_config={"apiKey": "sk-other-value", "temperature": 0.5},
    )

    changes = {(c.field, c.kind): (c.before, c.after) for c in preview.agents[0].changes}
    assert changes == {
        ("model", "changed"): ("gpt-4o-mini", "gpt-4.1"),
        ("providerConfig.apiKey", "changed"): ("[redacted]", "[redacted]"),
        ("providerConfig.temperature", "changed"): (0.2, 0.5),
        ("promptPins.triage-system", "added"): (None, "3"),
        ("toolRefs", "added"): (None, "mailer"),
        ("toolRefs", "removed"): ("search", None),
    }
    assert SECRET_VALUE not in preview.model_dump_json() and "sk-other-value" not in preview.model_dump_json()


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"environmentId": "env_doesnotexist"}, "environmentId"),
        ({"agentStableKeys": ["alpha", "ghost"]}, "agentStableKeys"),
        ({"agentStableKeys": ["drafty"]}, "agentStableKeys"),
        ({"agentStableKeys": []}, "agentStableKeys"),
        ({"agentVersions": {"alpha": 9}}, "agentVersions"),
        ({"agentVersions": {"beta": 1}}, "agentVersions"),
        ({"agentVersions": {"alpha": 0}}, "agentVersions.alpha"),
        ({"promptName": "triage"}, "version"),
        ({"version": "2"}, "promptName"),
        ({"toolRefs": ["no-such-tool"]}, "toolRefs"),
        ({"agentProviderConfig": "flat"}, "agentProviderConfig"),
        ({"surprise": 1}, "surprise"),
    ],
)
@pytest.mark.parametrize("path", ["agents/deployments/preview", "agents/deployments"])
def test_bad_input_is_400_naming_the_field(client, http, org, db, path, change, field):
    environment = client.environments.create("staging").id
    versioned_agent(client, "alpha")
    client.agents.create("drafty", "openai")
    body = {"orgSlug": org.slug, "environmentId": environment, "agentStableKeys": ["alpha"], **change}
    jobs_before = count_rows(db, "deployment_jobs")
    response = http.post(path, json=body, headers=org.headers)
    assert response.status_code == 400, response.text
    assert field in {detail["field"] for detail in response.json()["details"]}, response.json()
    assert count_rows(db, "deployment_jobs") == jobs_before


@pytest.fixture
def pinnable(client, server, other_org) -> str:
    """An environment, and an agent `alpha` whose prompt references name: an artifact of its own
    registry with versions 1 and 2 (`triage`), one that does not exist (`missing`), one in another
    organization's private registry (`private`) and one in its public registry (`shared`)."""
    prompts = client.registries.create("prompts").registry_ref
    for text in ("Sort.", "Sort tickets."):
        client.registries.publish(prompts, "triage", text)
    with OrgdeckClient(server.url, other_org.key, org_slug=other_org.slug) as other:
        private = other.registries.create("private-prompts").registry_ref
        shared = other.registries.create("shared-prompts", visibility="public").registry_ref
        for registry in (private, shared):
            other.registries.publish(registry, "greeting", "Hello.")
    references = {
        "triage": f"{prompts}/triage@production",
        "missing": f"{prompts}/nothing@production",
        "private": f"{private}/greeting@1",
        "shared": f"{shared}/greeting",
    }
    client.agents.create("alpha", "openai", provider_config={"model": "m"}, prompt_references=references)
    client.agents.snapshot("alpha")
    return client.environments.create("staging").id


PIN_PATHS = ("agents/deployments/preview", "agents/deployments", "change-requests")


def pin_request(path: str, org: Org, environment: str, pin: dict[str, str]) -> dict[str, Any]:
    body = {"environmentId": environment, "agentStableKeys": ["alpha"], **pin}
    if path == "change-requests":
        return {"orgSlug": org.slug, "kind": "deployment", "payload": body, "reason": "Pin the prompt"}
    return {"orgSlug": org.slug, **body}


@pytest.mark.parametrize(
    ("pin", "field"),
    [
        ({"promptName": "summary", "version": "1"}, "promptName"),  # no such reference
        ({"promptName": "missing", "version": "1"}, "promptName"),  # no such artifact
        ({"promptName": "private", "version": "1"}, "promptName"),  # not readable by this org
        ({"promptName": "triage", "version": "3"}, "version"),  # no such version
    ],
)
def test_a_pin_to_what_does_not_exist_is_400_naming_it(http, org, db, pinnable, pin, field):
    before = {table: count_rows(db, table) for table in ("deployment_jobs", "change_requests")}
    for path in PIN_PATHS:
        response = http.post(path, json=pin_request(path, org, pinnable, pin), headers=org.headers)
        assert response.status_code == 400, (path, response.text)
        assert [detail["field"] for detail in response.json()["details"]] == [field], (path, response.json())
    assert {table: count_rows(db, table) for table in before} == before


@pytest.mark.parametrize(
    "pin", [{"promptName": "triage", "version": "2"}, {"promptName": "shared", "version": "1"}]
)
def test_a_pin_to_a_version_that_exists_is_deployed(client, http, org, pinnable, pin):
    """Its own registry's artifact, or a public one of another organization."""
    answers = {
        path: http.post(path, json=pin_request(path, org, pinnable, pin), headers=org.headers)
        for path in PIN_PATHS
    }
    assert {path: answer.status_code for path, answer in answers.items()} == dict.fromkeys(PIN_PATHS, 200)
    job = wait_for_end(client, answers["agents/deployments"].json()["id"])
    assert job.status == "complete"
    pinned = {"prompt_name": pin["promptName"], "version": pin["version"]}
    assert not client.deployments.preview(pinnable, ["alpha"], **pinned).has_changes


# -- jobs through the worker ----------------------------------------------------------------


def test_builtin_deploy_completes_and_records_the_deployed_state_and_an_event(client, db):
    environment = client.environments.create("staging").id
    versioned_agent(client, "alpha")
    created = client.deployments.deploy(environment, ["alpha"], model="gpt-4.1")
    assert (created.status, created.attempts, created.started_at) == ("pending", 0, None)
    assert [(a.stable_key, a.version, a.status) for a in created.agents] == [("alpha", 1, "pending")]

    job = wait_for_end(client, created.id)

    assert (job.status, job.attempts, job.message) == ("complete", 1, "Deployed 1 agent")
    assert job.started_at is not None and job.finished_at is not None and job.started_at <= job.finished_at
    assert [(a.stable_key, a.status, a.error) for a in job.agents] == [("alpha", "complete", None)]
    assert [kind for kind, _ in events_of(db, client.org_slug, job.id)] == ["deployment.complete"]
    assert not client.deployments.preview(environment, ["alpha"], model="gpt-4.1").has_changes


def test_rollback_deploys_the_named_version(client):
    environment = client.environments.create("prod").id
    versioned_agent(client, "alpha")
    client.agents.update("alpha", provider_config={"model": "gpt-4o"})
    client.agents.snapshot("alpha")
    assert wait_for_end(client, client.deployments.deploy(environment, ["alpha"]).id).agents[0].version == 2
    rolled_back = wait_for_end(
        client, client.deployments.deploy(environment, ["alpha"], agent_versions={"alpha": 1}).id
    )
    assert (rolled_back.status, rolled_back.agents[0].version) == ("complete", 1)
    assert (
        client.deployments.preview(environment, ["alpha"], agent_versions={"alpha": 1}).has_changes is False
    )


def test_webhook_target_gets_a_signed_manifest_with_secrets_resolved_only_there(client, database_url, target):
    environment = webhook_environment(client, target)
    secret_value = f"sk-env-{uuid.uuid4().hex}"
    client.environments.secrets.set("OPENAI_KEY", secret_value, environment_id=environment)
    versioned_agent(client, "alpha", apiKey="${secret:OPENAI_KEY}")
    versioned_agent(client, "beta")

    job = wait_for_end(client, client.deployments.deploy(environment, ["alpha", "beta"]).id)

    assert job.status == "complete", job.message
    assert target.bad_signatures == 0 and len(target.manifests) == 1
    manifest = target.manifests[0]
    assert manifest["jobId"] == job.id and manifest["environment"]["id"] == environment
    sent = {agent["stableKey"]: agent for agent in manifest["agents"]}
    assert sent["alpha"]["config"]["providerConfig"]["apiKey"] == secret_value
    assert sent["alpha"]["version"] == 1 and len(sent["alpha"]["configHash"]) == 64
    assert secret_value not in client.deployments.job(job.id).model_dump_json()
    assert not raw_database_contains(database_url, secret_value)


def test_webhook_results_decide_partial_and_error_with_agent_error_events(client, db, target):
    environment = webhook_environment(client, target)
    for key in ("alpha", "beta", "gamma"):
        versioned_agent(client, key)
    target.failing = {"beta"}

    partial = wait_for_end(client, client.deployments.deploy(environment, ["alpha", "beta", "gamma"]).id)

    assert partial.status == "partial"
    results = {a.stable_key: (a.status, a.error) for a in partial.agents}
    assert results == {
        "alpha": ("complete", None),
        "beta": ("error", "refused by the target"),
        "gamma": ("complete", None),
    }
    assert "1 of 3 agents failed" in (partial.message or "")
    kinds = Counter(kind for kind, _ in events_of(db, client.org_slug, partial.id))
    assert kinds == Counter({"deployment.partial": 1, "agent.error": 1})
    agent_error = next(p for kind, p in events_of(db, client.org_slug, partial.id) if kind == "agent.error")
    assert (agent_error["stableKey"], agent_error["environmentId"]) == ("beta", environment)
    # Deployed state is recorded only for the agents that succeeded.
    statuses = {
        a.stable_key: a.status for a in client.deployments.preview(environment, ["alpha", "beta"]).agents
    }
    assert statuses == {"alpha": "unchanged", "beta": "added"}

    target.failing = {"alpha", "beta"}
    failed = wait_for_end(client, client.deployments.deploy(environment, ["alpha", "beta"]).id)
    assert failed.status == "error"
    kinds = Counter(kind for kind, _ in events_of(db, client.org_slug, failed.id))
    assert kinds == Counter({"deployment.error": 1, "agent.error": 2})


def test_an_error_quoting_what_the_target_was_sent_shows_none_of_its_credentials(client, db, target):
    """The manifest carries the real values; the job's errors and events, read by every viewer,
    carry none of them, however the target quotes them."""
    environment = webhook_environment(client, target)
    token = f"tok-{uuid.uuid4().hex}"
    client.environments.secrets.set("TENANT_TOKEN", token, environment_id=environment)
    versioned_agent(
        client, "alpha", apiKey=SECRET_VALUE, endpoint="https://llm.example.com/${secret:TENANT_TOKEN}"
    )
    target.failing = {"alpha"}
    target.explain = lambda agent: (
        f"key {agent['config']['providerConfig']['apiKey']} refused at "
        f"{agent['config']['providerConfig']['endpoint']}; sent {json.dumps(agent['config'])}"
    )

    job = wait_for_end(client, client.deployments.deploy(environment, ["alpha"]).id)

    sent = target.manifests[0]["agents"][0]["config"]["providerConfig"]
    assert (sent["apiKey"], sent["endpoint"]) == (SECRET_VALUE, f"https://llm.example.com/{token}")
    (result,) = job.agents
    assert result.error is not None and result.error.startswith("key [redacted] refused at")
    shown = job.model_dump_json() + json.dumps(events_of(db, client.org_slug, job.id))
    assert SECRET_VALUE not in shown and token not in shown


def test_a_target_answering_an_error_or_a_bad_signature_key_fails_every_agent(client, target):
    environment = webhook_environment(client, target)
    versioned_agent(client, "alpha")
    target.status = 503
    job = wait_for_end(client, client.deployments.deploy(environment, ["alpha"]).id)
    assert (job.status, job.agents[0].error) == ("error", "The target answered HTTP 503")

    target.status = 200
    target.key = client.deployments.create_signing_key(environment).secret[:-4] + "AAA="
    job = wait_for_end(client, client.deployments.deploy(environment, ["alpha"]).id)
    assert (job.status, job.agents[0].error) == ("error", "The target answered HTTP 401")
    assert target.bad_signatures == 1


def test_a_missing_secret_fails_that_agent_without_calling_out_for_it(client, target):
    environment = webhook_environment(client, target)
    versioned_agent(client, "alpha", apiKey="${secret:NOT_SET}")
    versioned_agent(client, "beta")
    job = wait_for_end(client, client.deployments.deploy(environment, ["alpha", "beta"]).id)
    assert job.status == "partial"
    assert {a.stable_key: a.error for a in job.agents} == {
        "alpha": "Secrets not found for this environment: NOT_SET",
        "beta": None,
    }
    assert [a["stableKey"] for a in target.manifests[0]["agents"]] == ["beta"]


def test_a_webhook_environment_needs_a_signing_key_before_deploying(client):
    environment = client.environments.create(
        "hooked", target="webhook", webhook_url="http://127.0.0.1:9/x"
    ).id
    versioned_agent(client, "alpha")
    [warning] = client.deployments.preview(environment, ["alpha"]).warnings
    assert warning.code == "signing_key_missing" and "signing key" in warning.message
    assert client.environments.get(environment).signing_key_created_at is None
    with pytest.raises(BadRequest) as refused:
        client.deployments.deploy(environment, ["alpha"])
    assert refused.value.code == "signing_key_missing"
    assert "signing key" in refused.value.message
    assert refused.value.details[0].field == "environmentId"
    key = client.deployments.create_signing_key(environment)
    assert client.deployments.preview(environment, ["alpha"]).warnings == []
    [listed] = [e for e in client.environments.list().items if e.id == environment]
    assert listed.signing_key_created_at == key.created_at
    assert client.environments.get(environment).signing_key_created_at == key.created_at
    assert client.deployments.deploy(environment, ["alpha"]).status == "pending"
    replaced = client.deployments.create_signing_key(environment)
    assert replaced.secret != key.secret and replaced.created_at > key.created_at
    assert client.environments.get(environment).signing_key_created_at == replaced.created_at


def test_fleet_deploy_makes_one_job_for_every_agent_of_the_fleet(client, http, org):
    environment = client.environments.create("staging").id
    fleet = client.fleets.create("Support")
    for key in ("alpha", "beta"):
        client.agents.create(key, "openai", fleet_id=fleet.id)
        client.agents.snapshot(key)
    versioned_agent(client, "outsider")

    job = wait_for_end(client, client.deployments.deploy_fleet(fleet.id, environment).id)

    assert job.status == "complete" and [a.stable_key for a in job.agents] == ["alpha", "beta"]
    assert (
        http.get(f"fleets/{fleet.id}", params={"orgSlug": org.slug}, headers=org.headers).status_code == 200
    )
    empty = client.fleets.create("Empty")
    with pytest.raises(BadRequest) as refused:
        client.deployments.deploy_fleet(empty.id, environment)
    assert refused.value.details[0].field == "fleetId"
    with pytest.raises(NotFound):
        client.deployments.deploy_fleet("fleet_doesnotexist", environment)


# -- leases: recovery and exclusivity ---------------------------------------------------------


def _job_left_running(db: Database, org_slug: str, environment: str, *, attempts: int) -> str:
    """A job as a worker that died mid-run leaves it: running, its lease expired."""
    with db.session(write=True) as session:
        org_id = session.scalar(select(OrganizationRow.id).where(OrganizationRow.slug == org_slug))
        request = DeploymentRequest(
            org_slug=org_slug, environment_id=environment, agent_stable_keys=["alpha"]
        )
        job = deployments.create_job(session, org_id=org_id, request=request, actor="ops")
        # A job without a strategy is one wave: its starts are its wave's.
        job.status, job.attempts, job.wave_attempts = "running", attempts, attempts
        job.started_at = utcnow() - timedelta(minutes=5)
        job.lease_token = "lease_dead"
        job.lease_expires_at = utcnow() - timedelta(seconds=1)
        return job.id


def test_a_job_whose_worker_died_is_picked_up_again(client, db, settings):
    environment = client.environments.create("staging").id
    versioned_agent(client, "alpha")
    job_id = _job_left_running(db, client.org_slug, environment, attempts=1)
    run_deployment_jobs(db, settings)  # the service's own worker may take it first; either is right
    job = wait_for_end(client, job_id)
    assert (job.status, job.attempts) == ("complete", 2)


def test_a_job_that_keeps_losing_its_worker_fails_with_a_message(client, db, settings):
    environment = client.environments.create("staging").id
    versioned_agent(client, "alpha")
    job_id = _job_left_running(db, client.org_slug, environment, attempts=MAX_ATTEMPTS)
    run_deployment_jobs(db, settings)
    job = wait_for_end(client, job_id)
    assert job.status == "error"
    assert f"Gave up after {MAX_ATTEMPTS} attempts" in (job.message or "")
    assert [kind for kind, _ in events_of(db, client.org_slug, job_id)] == ["deployment.error", "agent.error"]


def test_concurrent_workers_never_run_the_same_job(client, db, settings: Settings, target):
    environment = webhook_environment(client, target)
    versioned_agent(client, "alpha")
    job_ids = [client.deployments.deploy(environment, ["alpha"]).id for _ in range(12)]
    workers = [Worker(db, settings, tasks=[run_deployment_jobs]) for _ in range(3)]

    def drain(worker: Worker) -> None:
        while worker.run_once():
            pass

    threads = [threading.Thread(target=drain, args=(worker,)) for worker in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    jobs = [wait_for_end(client, job_id) for job_id in job_ids]

    assert all(job.status == "complete" and job.attempts == 1 for job in jobs)
    runs = Counter(manifest["jobId"] for manifest in target.manifests)
    assert runs == Counter(dict.fromkeys(job_ids, 1))


# -- listing ---------------------------------------------------------------------------------


@pytest.fixture
def three_jobs(client, db) -> tuple[str, str, list[str]]:
    """Jobs in two environments: staging (complete, error) then prod (complete), oldest first."""
    staging = client.environments.create("staging").id
    prod = client.environments.create("prod").id
    versioned_agent(client, "alpha")
    ids = [wait_for_end(client, client.deployments.deploy(staging, ["alpha"]).id).id]
    second = wait_for_end(client, client.deployments.deploy(staging, ["alpha"]).id).id
    with db.session(write=True) as session:
        session.get(JobRow, second).status = "error"
    ids.append(second)
    ids.append(wait_for_end(client, client.deployments.deploy(prod, ["alpha"]).id).id)
    return staging, prod, ids


def test_jobs_list_newest_first_with_filters_and_both_status_encodings(http, org, three_jobs):
    staging, prod, ids = three_jobs

    def listed(**params: Any) -> list[str]:
        response = http.get(
            "agents/deployment-jobs", params={"orgSlug": org.slug, **params}, headers=org.headers
        )
        assert response.status_code == 200, response.text
        return [job["id"] for job in response.json()["items"]]

    assert listed() == ids[::-1]
    assert listed(environmentId=staging) == ids[1::-1]
    assert listed(status="error") == [ids[1]]
    assert listed(status="complete,error", environmentId=staging) == ids[1::-1]
    assert listed(status=["complete", "error"]) == ids[::-1]
    assert listed(status=["pending", "running"]) == []
    assert listed(status="complete", environmentId=prod) == [ids[2]]
    assert listed(limit="20.0") == ids[::-1]
    first = http.get(
        "agents/deployment-jobs", params={"orgSlug": org.slug, "limit": 2}, headers=org.headers
    ).json()
    assert [job["id"] for job in first["items"]] == [ids[2], ids[1]] and first["limit"] == 2
    assert listed(limit=2, cursor=first["nextCursor"]) == [ids[0]]
    detail = http.get(
        f"agents/deployment-jobs/{ids[0]}", params={"orgSlug": org.slug}, headers=org.headers
    ).json()
    assert detail["agents"] == [{"stableKey": "alpha", "version": 1, "status": "complete", "error": None}]


def test_jobs_list_keeps_the_utc_days_of_creation_asked_for(http, org, db, three_jobs):
    staging, prod, ids = three_jobs
    today = utcnow().date()
    midnight = datetime(today.year, today.month, today.day, tzinfo=UTC)
    # The first job made two days ago, just before midnight; the second yesterday, at its start.
    with db.session(write=True) as session:
        session.get(JobRow, ids[0]).created_at = midnight - timedelta(days=1, milliseconds=1)
        session.get(JobRow, ids[1]).created_at = midnight - timedelta(days=1)

    def listed(**params: Any) -> list[str]:
        response = http.get(
            "agents/deployment-jobs", params={"orgSlug": org.slug, **params}, headers=org.headers
        )
        assert response.status_code == 200, response.text
        return [job["id"] for job in response.json()["items"]]

    day = lambda n: (today - timedelta(days=n)).isoformat()  # noqa: E731
    assert listed(start=day(2), end=day(2)) == [ids[0]]
    assert listed(start=day(1), end=day(1)) == [ids[1]]
    assert listed(start=day(1)) == [ids[2], ids[1]]
    assert listed(end=day(1)) == [ids[1], ids[0]]
    assert listed(start=day(2), end=day(1), environmentId=staging, status="error") == [ids[1]]
    assert listed(start=day(2), end=day(0), environmentId=prod) == [ids[2]]
    assert listed(start=day(5), end=day(3)) == []
    first = http.get(
        "agents/deployment-jobs",
        params={"orgSlug": org.slug, "start": day(2), "limit": 1},
        headers=org.headers,
    ).json()
    assert [job["id"] for job in first["items"]] == [ids[2]]
    assert listed(start=day(2), limit=1, cursor=first["nextCursor"]) == [ids[1]]
    backwards = http.get(
        "agents/deployment-jobs",
        params={"orgSlug": org.slug, "start": day(1), "end": day(2)},
        headers=org.headers,
    )
    assert backwards.status_code == 400
    assert backwards.json()["details"][0]["field"] == "end"


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"limit": "0"}, "limit"),
        ({"start": "yesterday"}, "start"),
        ({"end": "2026-02-30"}, "end"),
        ({"limit": "1001"}, "limit"),
        ({"limit": "2.5"}, "limit"),
        ({"limit": "many"}, "limit"),
        ({"status": "done"}, "status"),
        ({"status": "complete,exploded"}, "status"),
    ],
)
def test_jobs_list_refuses_bad_query_values_naming_them(http, org, params, field):
    response = http.get("agents/deployment-jobs", params={"orgSlug": org.slug, **params}, headers=org.headers)
    assert response.status_code == 400, response.text
    assert response.json()["details"][0]["field"] == field


@pytest.mark.parametrize("limit", ["1", "1000", "1000.0"])
def test_jobs_list_accepts_the_limit_bounds(http, org, limit):
    response = http.get(
        "agents/deployment-jobs", params={"orgSlug": org.slug, "limit": limit}, headers=org.headers
    )
    assert response.status_code == 200, response.text
    assert response.json()["limit"] == int(float(limit))


def test_jobs_list_default_limit_is_20(http, org):
    response = http.get("agents/deployment-jobs", params={"orgSlug": org.slug}, headers=org.headers)
    assert response.json()["limit"] == 20


# -- isolation -------------------------------------------------------------------------------


def test_other_orgs_jobs_environments_and_agents_are_invisible(client, server, other_org, three_jobs, http):
    staging, _, ids = three_jobs
    with OrgdeckClient(server.url, other_org.key, org_slug=other_org.slug) as stranger:
        assert stranger.deployments.jobs().items == []
        with pytest.raises(NotFound):
            stranger.deployments.job(ids[0])
        versioned_agent(stranger, "alpha")
        with pytest.raises(BadRequest) as refused:
            stranger.deployments.preview(staging, ["alpha"])
        assert refused.value.details[0].field == "environmentId"
        with pytest.raises(BadRequest):
            stranger.deployments.create_signing_key(staging)
    response = http.get(
        f"agents/deployment-jobs/{ids[0]}", params={"orgSlug": other_org.slug}, headers=other_org.headers
    )
    assert response.status_code == 404


# -- authentication of the operations whose valid calls need fixtures (the rest are in test_auth) --

AUTHENTICATED_POSTS = ["agents/deployments/preview", "agents/deployments", "agents/deployments/signing-key"]


@pytest.mark.parametrize("path", AUTHENTICATED_POSTS)
def test_deployment_operations_need_a_key_of_the_named_org(http, org, other_org, path):
    body = {"orgSlug": org.slug, "environmentId": "env_x"}
    if path != "agents/deployments/signing-key":
        body["agentStableKeys"] = ["alpha"]
    missing = http.post(path, json=body)
    assert missing.status_code == 401 and missing.headers["www-authenticate"].startswith("Bearer")
    stranger = http.post(path, json=body, headers=other_org.headers)
    assert stranger.status_code == 403 and stranger.json()["code"] == "forbidden"


@pytest.mark.parametrize("route", ["agents/deployment-jobs", "notifications/logs"])
def test_an_empty_status_filter_is_refused_not_ignored(http, org, route):
    """`status=` names no status: a 400 naming the field, as its schema (an enum) says, not every row."""
    response = http.get(route, params={"orgSlug": org.slug, "status": ""}, headers=org.headers)
    assert response.status_code == 400, response.text
    assert [detail["field"] for detail in response.json()["details"]] == ["status"]

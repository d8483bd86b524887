"""Progressive rollout: waves by count and percent, a failed wave stopping or rolling back, the
verification webhook, pause, resume and abort, and a worker killed mid-rollout."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from api import OrgdeckClient
from api.deployments import DeploymentJob
from api.errors import ApiError, BadRequest, Forbidden
from service.runtime.bootstrap import create_org_with_key
from service.runtime.server import ServerThread
from service.storage.db import Database
from service.storage.migrate import upgrade
from tests.conftest import make_settings, scratch_database, wait_for
from tests.processes import ROOT
from tests.test_changes import team  # noqa: F401 (a fixture)
from tests.test_deployments import events_of, versioned_agent, wait_for_end


class Target:
    """A deployment target on loopback: checks signatures, fails the agents it is told to, holds
    the agents it is told to until released (then answers 503: not applied), and counts each agent
    it applied (answered complete), by stable key and version."""

    def __init__(self) -> None:
        self.key = ""
        self.failing: set[str] = set()
        self.holding: set[str] = set()
        self.released = threading.Event()
        self.held = threading.Event()
        self.applied: Counter[tuple[str, int]] = Counter()
        self.manifests: list[dict[str, Any]] = []
        target = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                try:
                    Webhook(target.key).verify(body, dict(self.headers.items()))
                except WebhookVerificationError:
                    self._answer(401, {})
                    return
                manifest = json.loads(body)
                target.manifests.append(manifest)
                keys = {agent["stableKey"] for agent in manifest["agents"]}
                if keys & target.holding:
                    target.held.set()
                    target.released.wait(60)
                    self._answer(503, {})
                    return
                results = []
                for agent in manifest["agents"]:
                    if agent["stableKey"] in target.failing:
                        results.append(
                            {"stableKey": agent["stableKey"], "status": "error", "error": "refused"}
                        )
                    else:
                        target.applied[agent["stableKey"], agent["version"]] += 1
                        results.append({"stableKey": agent["stableKey"], "status": "complete"})
                self._answer(200, {"results": results})

            def _answer(self, status: int, answer: dict[str, Any]) -> None:
                data = json.dumps(answer).encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass  # the worker that asked was killed

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/deploy"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()


class Verifier:
    """A verification endpoint on loopback: answers `pass`, `fail`, a status, or hangs; keeps each
    call it verified the signature of."""

    def __init__(self) -> None:
        self.key = ""
        self.mode = "pass"
        self.calls: list[dict[str, Any]] = []
        self.unsigned = 0
        verifier = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                try:
                    Webhook(verifier.key).verify(body, dict(self.headers.items()))
                except WebhookVerificationError:
                    verifier.unsigned += 1
                verifier.calls.append(json.loads(body))
                if verifier.mode == "hang":
                    time.sleep(5)
                status, answer = {
                    "pass": (200, {"result": "pass"}),
                    "fail": (200, {"result": "fail", "message": "error rate 7% above 2%"}),
                    "500": (500, {"result": "pass"}),
                    "hang": (200, {"result": "pass"}),
                }[verifier.mode]
                data = json.dumps(answer).encode()
                try:
                    self.send_response(status)
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass  # the worker gave up waiting

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/verify"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def target() -> Iterator[Target]:
    receiver = Target()
    yield receiver
    receiver.close()


@pytest.fixture
def verifier() -> Iterator[Verifier]:
    endpoint = Verifier()
    yield endpoint
    endpoint.close()


def hook_environment(client: OrgdeckClient, target: Target) -> str:
    environment = client.environments.create(
        f"roll-{uuid.uuid4().hex[:8]}", target="webhook", webhook_url=target.url
    )
    target.key = client.deployments.create_signing_key(environment.id).secret
    return environment.id


def agents(client: OrgdeckClient, count: int) -> list[str]:
    keys = [f"a{index}-{uuid.uuid4().hex[:6]}" for index in range(count)]
    for key in keys:
        versioned_agent(client, key)
    return keys


def waves_of(job: DeploymentJob) -> list[tuple[list[str], str]]:
    assert job.rollout is not None
    return [(wave.agent_stable_keys, wave.status) for wave in job.rollout.waves]


def wait_for_job(client: OrgdeckClient, job_id: str, check: Any, what: str) -> DeploymentJob:
    return wait_for(
        lambda: (job := client.deployments.job(job_id)) and check(job) and job, timeout=30, what=what
    )


def audit_actions(client: OrgdeckClient, job_id: str) -> list[str]:
    return [event.action for event in client.audit.list(target_id=job_id).items]


# -- waves --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("size", "expected"), [(2, [2, 2, 1]), ("34%", [2, 2, 1]), ("100%", [5]), ("1%", [1] * 5)]
)
def test_waves_are_split_by_count_and_percent_rounded_up(client, size, expected):
    keys = agents(client, 5)
    environment = client.environments.create(f"w-{uuid.uuid4().hex[:8]}").id
    job = client.deployments.deploy(environment, keys, strategy={"waveSize": size})
    assert [len(wave) for wave, _ in waves_of(job)] == expected
    assert [key for wave, _ in waves_of(job) for key in wave] == keys
    ended = wait_for_end(client, job.id)
    assert ended.status == "complete"
    assert {status for _, status in waves_of(ended)} == {"complete"}
    assert all(wave.started_at and wave.finished_at for wave in ended.rollout.waves)


def test_a_job_without_a_strategy_has_no_rollout(client):
    keys = agents(client, 2)
    environment = client.environments.create(f"w-{uuid.uuid4().hex[:8]}").id
    job = wait_for_end(client, client.deployments.deploy(environment, keys).id)
    assert job.status == "complete" and job.rollout is None


@pytest.mark.parametrize(
    ("strategy", "field"),
    [
        ({"waveSize": 0}, "strategy.waveSize"),
        ({"waveSize": "0%"}, "strategy.waveSize"),
        ({"waveSize": "101%"}, "strategy.waveSize"),
        ({"waveSize": "half"}, "strategy.waveSize"),
        ({"waveSize": 2, "pauseSeconds": -1}, "strategy.pauseSeconds"),
        ({"waveSize": 2, "pauseSeconds": 86401}, "strategy.pauseSeconds"),
        ({"waveSize": 2, "onFailure": "retry"}, "strategy.onFailure"),
        ({"pauseSeconds": 1}, "strategy.waveSize"),
    ],
)
def test_a_bad_strategy_is_400_naming_its_field_and_makes_no_job(client, strategy, field):
    keys = agents(client, 1)
    environment = client.environments.create(f"w-{uuid.uuid4().hex[:8]}").id
    with pytest.raises(BadRequest) as refused:
        client.deployments.deploy(environment, keys, strategy=strategy)
    assert field in [detail.field for detail in refused.value.details]
    assert client.deployments.jobs(environment_id=environment).items == []


def test_a_failed_wave_under_stop_skips_the_later_waves_and_touches_none_of_their_agents(
    client, target, db, org
):
    keys = agents(client, 6)
    environment = hook_environment(client, target)
    target.failing = {keys[3]}
    strategy = {"waveSize": 2, "pauseSeconds": 0, "onFailure": "stop"}
    job = wait_for_end(client, client.deployments.deploy(environment, keys, strategy=strategy).id)
    assert job.status == "partial"
    assert [status for _, status in waves_of(job)] == ["complete", "failed", "skipped"]
    assert "Wave 2 failed" in (job.message or "") and keys[3] in (job.message or "")
    assert set(target.applied) == {(keys[0], 1), (keys[1], 1), (keys[2], 1)}
    sent = {agent["stableKey"] for manifest in target.manifests for agent in manifest["agents"]}
    assert sent.isdisjoint(keys[4:])
    results = {agent.stable_key: agent.status for agent in job.agents}
    assert [results[key] for key in keys] == [
        "complete",
        "complete",
        "complete",
        "error",
        "pending",
        "pending",
    ]
    running = {
        pair.stable_key: pair.deployed_version
        for pair in client.deployments.status(environment_id=environment).items
    }
    assert [running[key] for key in keys] == [1, 1, 1, None, None, None]
    assert [kind for kind, _ in events_of(db, org.slug, job.id) if kind.startswith("deployment.")] == [
        "deployment.partial"
    ]
    assert "stopDeploymentJob" in audit_actions(client, job.id)


def test_a_failed_wave_under_rollback_puts_the_agents_back_on_what_they_ran(client, target, db, org):
    keys = agents(client, 5)
    environment = hook_environment(client, target)
    assert wait_for_end(client, client.deployments.deploy(environment, keys[1:]).id).status == "complete"
    for key in keys:
        client.agents.update(key, provider_config={"model": "gpt-4o", "temperature": 0.5})
        client.agents.snapshot(key)
    target.applied.clear()
    target.failing = {keys[3]}
    strategy = {"waveSize": 2, "onFailure": "rollback"}
    job = wait_for_end(client, client.deployments.deploy(environment, keys, strategy=strategy).id)
    assert job.status == "rolled_back"
    assert [status for _, status in waves_of(job)] == ["rolled_back", "rolled_back", "skipped"]
    # keys[0] ran nothing before: left in place, said so; the others of waves 1-2 back on version 1.
    running = {
        pair.stable_key: pair.deployed_version
        for pair in client.deployments.status(environment_id=environment).items
    }
    assert [running[key] for key in keys] == [2, 1, 1, 1, 1]
    assert keys[0] in (job.message or "") and "ran nothing here before" in (job.message or "")
    rollback = target.manifests[-1]
    assert rollback["jobId"] == job.id
    assert {(a["stableKey"], a["version"]) for a in rollback["agents"]} == {(k, 1) for k in keys[1:4]}
    assert target.applied[keys[4], 2] == 0
    history = client.deployments.history(agent=keys[1], environment_id=environment).items
    assert history[0].job_status == "rolled_back"
    kinds = [kind for kind, _ in events_of(db, org.slug, job.id) if kind.startswith("deployment.")]
    assert kinds == ["deployment.rolled_back"]
    rolled = next(
        payload for kind, payload in events_of(db, org.slug, job.id) if kind == "deployment.rolled_back"
    )
    assert rolled["keptInPlace"] == [keys[0]]
    assert "rollBackDeploymentJob" in audit_actions(client, job.id)


def test_a_fleet_deploy_takes_a_strategy(client):
    keys = agents(client, 3)
    environment = client.environments.create(f"f-{uuid.uuid4().hex[:8]}").id
    fleet = client.fleets.create(f"fleet-{uuid.uuid4().hex[:6]}", environment_ids=[environment])
    for key in keys:
        client.agents.update(key, fleet_id=fleet.id)
    job = client.deployments.deploy_fleet(fleet.id, environment, strategy={"waveSize": "50%"})
    assert [len(wave) for wave, _ in waves_of(job)] == [2, 1]
    assert wait_for_end(client, job.id).status == "complete"


def test_a_strategy_travels_through_a_protected_environments_change_request(client, team):  # noqa: F811
    keys = agents(client, 2)
    environment = client.environments.create(f"c-{uuid.uuid4().hex[:8]}").id
    client.environments.update(environment, protected=True)
    ana, bo = team.member("ana", "operator"), team.member("bo", "operator")
    strategy = {"waveSize": 1, "pauseSeconds": 0, "onFailure": "rollback"}
    with pytest.raises(Forbidden):
        ana.deployments.deploy(environment, keys, strategy=strategy)
    payload = {"environmentId": environment, "agentStableKeys": keys, "strategy": strategy}
    opened = ana.change_requests.open("deployment", payload, "Release in waves")
    bo.change_requests.approve(opened.id)
    [job_id] = [job.id for job in client.deployments.jobs(environment_id=environment).items]
    job = wait_for_end(client, job_id)
    assert job.status == "complete" and job.rollout is not None
    assert job.rollout.strategy.on_failure == "rollback" and len(job.rollout.waves) == 2


# -- verification ------------------------------------------------------------------------------


def verified_environment(client: OrgdeckClient, target: Target, verifier: Verifier) -> str:
    environment = hook_environment(client, target)
    client.environments.update(environment, verification_webhook_url=verifier.url)
    verifier.key = target.key
    return environment


def test_each_wave_is_verified_by_a_signed_call(client, target, verifier):
    keys = agents(client, 3)
    environment = verified_environment(client, target, verifier)
    assert client.environments.get(environment).verification_webhook_url == verifier.url
    job = wait_for_end(client, client.deployments.deploy(environment, keys, strategy={"waveSize": 2}).id)
    assert job.status == "complete"
    assert verifier.unsigned == 0
    assert verifier.calls == [
        {
            "jobId": job.id,
            "environmentId": environment,
            "wave": 0,
            "agents": [{"stableKey": k, "version": 1} for k in keys[:2]],
        },
        {
            "jobId": job.id,
            "environmentId": environment,
            "wave": 1,
            "agents": [{"stableKey": keys[2], "version": 1}],
        },
    ]
    assert [wave.verification.result for wave in job.rollout.waves] == ["pass", "pass"]


@pytest.mark.parametrize(
    ("mode", "reason"),
    [("fail", "error rate 7% above 2%"), ("hang", "did not answer within 2 s"), ("500", "answered HTTP 500")],
)
def test_a_failed_verification_stops_the_rollout_with_its_reason(client, target, verifier, mode, reason):
    keys = agents(client, 4)
    environment = verified_environment(client, target, verifier)
    verifier.mode = mode
    job = wait_for_end(client, client.deployments.deploy(environment, keys, strategy={"waveSize": 2}).id)
    assert job.status == "partial"
    assert [status for _, status in waves_of(job)] == ["failed", "skipped"]
    verification = job.rollout.waves[0].verification
    assert (
        verification is not None and verification.result == "fail" and reason in (verification.message or "")
    )
    assert reason in (job.message or "")
    assert set(target.applied) == {(keys[0], 1), (keys[1], 1)}


def test_a_job_without_a_strategy_is_verified_as_one_wave(client, target, verifier):
    keys = agents(client, 2)
    environment = verified_environment(client, target, verifier)
    verifier.mode = "fail"
    job = wait_for_end(client, client.deployments.deploy(environment, keys).id)
    assert job.status == "partial" and "error rate 7% above 2%" in (job.message or "")
    assert len(verifier.calls) == 1 and verifier.calls[0]["wave"] == 0


def test_only_an_admin_sets_the_verification_webhook_and_a_protected_environment_only_through_review(
    client,
    team,  # noqa: F811
    verifier,
):
    environment = client.environments.create(f"v-{uuid.uuid4().hex[:8]}")
    ops = team.member("ops", "operator")
    with pytest.raises(Forbidden) as refused:
        ops.environments.update(environment.id, verification_webhook_url=verifier.url)
    assert refused.value.code == "insufficient_role"
    client.environments.update(environment.id, protected=True)
    with pytest.raises(Forbidden) as guarded:
        client.environments.update(environment.id, verification_webhook_url=verifier.url)
    assert guarded.value.code == "approval_required"
    assert client.environments.get(environment.id).verification_webhook_url is None


# -- pause, resume, abort -------------------------------------------------------------------------


def test_a_paused_rollout_starts_no_wave_until_resumed(client, db, org):
    keys = agents(client, 3)
    environment = client.environments.create(f"p-{uuid.uuid4().hex[:8]}").id
    job = client.deployments.deploy(environment, keys, strategy={"waveSize": 1, "pauseSeconds": 1})
    paused = client.deployments.pause(job.id)
    assert paused.status == "paused" and paused.rollout.paused_by == "admin"
    # The wave under way (if a worker took it before the pause) finishes; no other starts.
    time.sleep(3)
    held = client.deployments.job(job.id)
    assert held.status == "paused"
    assert sum(agent.status != "pending" for agent in held.agents) <= 1
    time.sleep(1.5)
    assert client.deployments.job(job.id).agents == held.agents
    with pytest.raises(ApiError) as again:
        client.deployments.pause(job.id)
    assert again.value.status == 409 and again.value.code == "job_not_pausable"
    resumed = client.deployments.resume(job.id)
    assert resumed.status in ("pending", "running") and resumed.rollout.paused_at is None
    ended = wait_for_end(client, job.id)
    assert ended.status == "complete"
    kinds = [kind for kind, _ in events_of(db, org.slug, job.id) if kind.startswith("deployment.")]
    assert kinds == ["deployment.paused", "deployment.resumed", "deployment.complete"]
    actions = audit_actions(client, job.id)
    assert "pauseDeploymentJob" in actions and "resumeDeploymentJob" in actions


def test_an_aborted_rollout_starts_no_further_wave_and_keeps_what_it_deployed(client, db, org):
    keys = agents(client, 3)
    environment = client.environments.create(f"x-{uuid.uuid4().hex[:8]}").id
    job = client.deployments.deploy(environment, keys, strategy={"waveSize": 1, "pauseSeconds": 600})
    wait_for_job(client, job.id, lambda j: j.rollout.current_wave == 1, "wave 1 done")
    aborted = client.deployments.abort(job.id)
    assert aborted.status == "aborted" and aborted.finished_at is not None
    assert [status for _, status in waves_of(aborted)] == ["complete", "skipped", "skipped"]
    running = {
        pair.stable_key: pair.deployed_version
        for pair in client.deployments.status(environment_id=environment).items
    }
    assert [running[key] for key in keys] == [1, None, None]
    for transition in (client.deployments.abort, client.deployments.resume, client.deployments.pause):
        with pytest.raises(ApiError) as refused:
            transition(job.id)
        assert refused.value.status == 409
    kinds = [kind for kind, _ in events_of(db, org.slug, job.id) if kind.startswith("deployment.")]
    assert kinds == ["deployment.aborted"]
    assert "abortDeploymentJob" in audit_actions(client, job.id)
    metrics = client.deployments.metrics(environment_id=environment)
    assert (metrics.totals.deployments, metrics.totals.failures) == (1, 0)


def test_a_job_without_a_strategy_is_not_paused_and_is_aborted_only_while_pending(client):
    keys = agents(client, 1)
    environment = client.environments.create(f"n-{uuid.uuid4().hex[:8]}").id
    job = wait_for_end(client, client.deployments.deploy(environment, keys).id)
    with pytest.raises(ApiError) as refused:
        client.deployments.pause(job.id)
    assert refused.value.status == 409 and refused.value.code == "not_a_rollout"
    with pytest.raises(ApiError) as ended:
        client.deployments.abort(job.id)
    assert ended.value.status == 409 and ended.value.code == "job_not_abortable"


def test_transitions_need_an_operator_and_name_a_job_of_the_org(client, team, other_org, server):  # noqa: F811
    keys = agents(client, 2)
    environment = client.environments.create(f"r-{uuid.uuid4().hex[:8]}").id
    job = client.deployments.deploy(environment, keys, strategy={"waveSize": 1, "pauseSeconds": 600})
    viewer = team.member("val", "viewer")
    for transition in (viewer.deployments.pause, viewer.deployments.resume, viewer.deployments.abort):
        with pytest.raises(Forbidden) as refused:
            transition(job.id)
        assert refused.value.code == "insufficient_role"
    with OrgdeckClient(server.url, other_org.key, org_slug=other_org.slug) as stranger:
        with pytest.raises(ApiError) as unknown:
            stranger.deployments.abort(job.id)
        assert unknown.value.status == 404
    assert client.deployments.abort(job.id).status == "aborted"


# -- a worker killed mid-rollout ---------------------------------------------------------------------


LEASE_SECONDS = 2


def worker_process(settings: Any) -> subprocess.Popen[bytes]:
    environment = {
        **os.environ,
        "ORGDECK_DATA_DIR": str(settings.data_dir),
        "ORGDECK_DATABASE_URL": settings.resolved_database_url,
        "ORGDECK_ENCRYPTION_KEYS": ",".join(settings.encryption_keys),
        "ORGDECK_OUTBOUND_ALLOW_PRIVATE": "127.0.0.1",
        "ORGDECK_WORKER_IDLE_SECONDS": "0.05",
        "ORGDECK_JOB_LEASE_SECONDS": str(LEASE_SECONDS),
    }
    return subprocess.Popen([sys.executable, "-m", "service", "worker"], cwd=ROOT, env=environment)


def test_a_rollout_whose_worker_is_killed_is_finished_by_another_applying_nothing_twice(tmp_path, target):
    with scratch_database(tmp_path) as database_url:
        settings = make_settings(
            tmp_path / "data", database_url, run_worker=False, outbound_allow_private=["127.0.0.1"]
        )
        db = Database(settings.resolved_database_url)
        upgrade(db)
        server = ServerThread(settings).start()
        slug, key = create_org_with_key(db, slug=f"k-{uuid.uuid4().hex[:8]}", name="K", key_name="admin")
        first = second = None
        try:
            with OrgdeckClient(server.url, key, org_slug=slug) as client:
                keys = agents(client, 6)
                environment = hook_environment(client, target)
                target.holding = {keys[2]}
                job = client.deployments.deploy(environment, keys, strategy={"waveSize": 2})
                first = worker_process(settings)
                assert target.held.wait(60), "wave 2 never reached the target"
                first.send_signal(signal.SIGKILL)
                first.wait(30)
                target.holding = set()
                target.released.set()
                stuck = client.deployments.job(job.id)
                assert stuck.status == "running" and stuck.rollout.waves[1].status == "running"
                second = worker_process(settings)
                ended = wait_for_end(client, job.id, timeout=60)
                assert ended.status == "complete", ended.message
                assert ended.attempts == 4  # waves 1 and 3 once, wave 2 twice
                assert dict(target.applied) == {(k, 1): 1 for k in keys}
                wave_one = [
                    m for m in target.manifests if {a["stableKey"] for a in m["agents"]} & set(keys[:2])
                ]
                assert len(wave_one) == 1
        finally:
            for process in (first, second):
                if process is not None and process.poll() is None:
                    process.kill()
                    process.wait(30)
            server.stop()
            db.dispose()

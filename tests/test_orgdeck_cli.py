"""The `orgdeck` command as a pipeline runs it: a subprocess against a live service, checked by its
output, its JSON (the API's own answer) and its exit code."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from api import OrgdeckClient
from api.version import VERSION
from tests.processes import ROOT
from tests.test_deployments import WebhookTarget, versioned_agent, wait_for_end, webhook_environment

COMMANDS = [
    [],
    ["login"],
    ["whoami"],
    ["prompts", "publish"],
    ["prompts", "get"],
    ["agents", "snapshot"],
    ["agents", "list"],
    ["agents", "show"],
    ["deploy"],
    ["deploy", "preview"],
    ["deploy", "run"],
    ["promote"],
    ["rollout"],
    ["rollout", "pause"],
    ["rollout", "resume"],
    ["rollout", "abort"],
    ["jobs", "list"],
    ["jobs", "show"],
    ["status"],
    ["policies", "draft"],
]


class Orgdeck:
    """Runs `python -m api …` from the checkout, as a pipeline would run `orgdeck …`."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env

    def __call__(
        self, *args: str, stdin: str | None = None, cwd: Path = ROOT, **env: str
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "api", *args],
            cwd=cwd,
            env={**self.env, "PYTHONPATH": str(ROOT), **env},
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def json(self, *args: str) -> Any:
        result = self(*args, "--json")
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)


def base_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORGDECK_")}
    return {**env, "ORGDECK_CONFIG": str(tmp_path / "config.json"), "COLUMNS": "200"}


@pytest.fixture
def orgdeck(server, org, tmp_path) -> Orgdeck:
    return Orgdeck({**base_env(tmp_path), "ORGDECK_API_URL": server.url, "ORGDECK_API_KEY": org.key})


@pytest.fixture
def api(http, org):
    """The API answered directly, to compare the command's JSON with."""

    def call(method: str, path: str, **kwargs: Any) -> Any:
        answer = http.request(method, path, headers=org.headers, **kwargs)
        assert answer.status_code == 200, answer.text
        return answer.json()

    return call


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "orgdeck")
def test_every_command_has_help_with_examples(orgdeck, command):
    result = orgdeck(*command, "--help")
    assert result.returncode == 0, result.stderr
    assert "Usage: orgdeck" in result.stdout
    assert "Example" in result.stdout


def test_usage_errors_exit_2(orgdeck):
    assert orgdeck("agents", "list", "--no-such-option").returncode == 2
    assert orgdeck("agents", "show").returncode == 2
    assert orgdeck("deploy", "preview", "production").returncode == 2
    assert orgdeck("nonsense").returncode == 2


def test_missing_configuration_says_what_to_set(tmp_path, server):
    bare = Orgdeck(base_env(tmp_path))
    no_url = bare("whoami")
    assert no_url.returncode == 2
    assert "ORGDECK_API_URL" in no_url.stderr
    no_key = bare("whoami", ORGDECK_API_URL=server.url)
    assert no_key.returncode == 3
    assert "ORGDECK_API_KEY" in no_key.stderr


def test_authentication_errors_exit_3_with_the_services_message(orgdeck, client):
    issued = client.api_keys.create("ci")
    client.api_keys.revoke(issued.id)
    revoked = orgdeck("agents", "list", ORGDECK_API_KEY=issued.key)
    assert revoked.returncode == 3
    assert "The API key has been revoked" in revoked.stderr
    assert revoked.stdout == ""
    assert orgdeck("whoami", ORGDECK_API_KEY="odk_" + "A" * 38).returncode == 3


def test_login_keeps_a_private_profile_that_commands_then_use(tmp_path, server, org):
    bare = Orgdeck(base_env(tmp_path))
    refused = bare("login", "--api-url", server.url, "--api-key", "odk_" + "A" * 38)
    assert refused.returncode == 3
    assert not (tmp_path / "config.json").exists()
    logged_in = bare("login", "--api-url", server.url, "--api-key", org.key)
    assert logged_in.returncode == 0, logged_in.stderr
    assert org.slug in logged_in.stdout
    config = tmp_path / "config.json"
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert json.loads(config.read_text())["profiles"]["default"] == {"apiUrl": server.url, "apiKey": org.key}
    assert (
        bare("whoami", "--json").stdout and json.loads(bare("whoami", "--json").stdout)["orgSlug"] == org.slug
    )
    # A second profile keeps the first; --profile picks one.
    staging = bare("login", "--profile", "staging", stdin=f"{server.url}\n{org.key}\n")
    assert staging.returncode == 0, staging.stderr
    assert set(json.loads(config.read_text())["profiles"]) == {"default", "staging"}
    assert bare("--profile", "staging", "whoami").returncode == 0
    assert bare("--profile", "nowhere", "whoami").returncode == 2


def test_prompts_publish_and_get(orgdeck, client, api, org, tmp_path):
    client.registries.create("support")
    source = tmp_path / "triage.md"
    source.write_text("You are {{ name }}.\nBe brief, kind and exact.\n")
    published = orgdeck(
        "prompts", "publish", "support", "triage", str(source), "--label", "production", "-m", "first"
    )
    assert published.returncode == 0, published.stderr
    assert f"Published {org.slug}/support/triage version 1" in published.stdout
    again = orgdeck.json(
        "prompts", "publish", f"{org.slug}/support", "triage", str(source), "--label", "production"
    )
    assert (again["created"], again["version"]) == (False, "1")
    newer = orgdeck(
        "prompts", "publish", "support", "triage", "-", "--version", "2.0.0", stdin="Hello {{ who }}"
    )
    assert newer.returncode == 0, newer.stderr

    content = orgdeck("prompts", "get", "support", "triage")
    assert content.returncode == 0
    assert content.stdout == source.read_text()  # production, byte for byte
    assert orgdeck("prompts", "get", "support", "triage", "--label", "latest").stdout == "Hello {{ who }}"
    record = orgdeck.json("prompts", "get", "support", "triage", "--version", "2.0.0")
    params = {"registryRef": f"{org.slug}/support", "name": "triage", "version": "2.0.0"}
    assert record == api("GET", "registries/artifacts/retrieve", params=params)

    chat = tmp_path / "chat.json"
    chat.write_text(
        json.dumps([{"role": "system", "content": "Be {{ tone }}."}, {"role": "user", "content": "Hi"}])
    )
    assert orgdeck("prompts", "publish", "support", "chat", str(chat), "--chat").returncode == 0
    assert json.loads(orgdeck("prompts", "get", "support", "chat").stdout) == json.loads(chat.read_text())

    assert orgdeck("prompts", "get", "support", "triage", "--label", "x", "--version", "1").returncode == 2
    assert orgdeck("prompts", "publish", "support", "bad", str(source), "--chat").returncode == 2
    missing = orgdeck("prompts", "get", "support", "nope")
    assert missing.returncode == 4
    assert "No artifact 'nope'" in missing.stderr
    invalid = orgdeck("prompts", "publish", "support", "triage", str(source), "--version", "not-semver")
    assert invalid.returncode == 1
    assert "version" in invalid.stderr


def test_agents_snapshot_list_and_show(orgdeck, client, api, org):
    client.agents.create("support-bot", "openai", tags=["team:support"], provider_config={"model": "gpt-4o"})
    snapshot = orgdeck.json("agents", "snapshot", "support-bot")
    assert snapshot == api("GET", "agents/support-bot/versions/1", params={"orgSlug": org.slug})
    client.agents.update("support-bot", provider_config={"model": "gpt-4o-mini"})
    text = orgdeck("agents", "snapshot", "support-bot")
    assert text.returncode == 0
    assert "support-bot version 2" in text.stdout

    listed = orgdeck.json("agents", "list")
    assert listed == api("POST", "agents/list", json={"orgSlug": org.slug, "limit": 50})
    table = orgdeck("agents", "list", "--tag", "team:support")
    assert "support-bot" in table.stdout
    assert orgdeck("agents", "list", "--tag", "team:other").stdout.count("support-bot") == 0

    shown = orgdeck.json("agents", "show", "support-bot")
    assert shown == api("GET", "agents/support-bot", params={"orgSlug": org.slug})
    assert "gpt-4o-mini" in orgdeck("agents", "show", "support-bot").stdout
    assert orgdeck("agents", "show", "ghost").returncode == 4
    assert orgdeck("agents", "snapshot", "ghost").returncode == 4


def test_deploy_preview_exits_1_when_something_would_change(orgdeck, client, api, org):
    versioned_agent(client, "support-bot")
    environment = client.environments.create("production")
    preview = orgdeck("deploy", "preview", "production", "support-bot", "--exit-code")
    assert preview.returncode == 1, preview.stderr
    assert "would change 1 of 1 agents" in preview.stdout
    assert "+ support-bot" in preview.stdout
    body = {"orgSlug": org.slug, "environmentId": environment.id, "agentStableKeys": ["support-bot"]}
    as_json = orgdeck("deploy", "preview", "production", "support-bot", "--json")
    assert as_json.returncode == 0  # without --exit-code, changes are not a failure
    assert json.loads(as_json.stdout) == api("POST", "agents/deployments/preview", json=body)

    wait_for_end(client, client.deployments.deploy(environment.id, ["support-bot"]).id)
    unchanged = orgdeck("deploy", "preview", environment.id, "support-bot", "--exit-code")
    assert unchanged.returncode == 0
    assert "would change nothing" in unchanged.stdout
    override = orgdeck("deploy", "preview", "production", "support-bot", "--model", "gpt-4o", "--exit-code")
    assert override.returncode == 1
    assert "model" in override.stdout and "gpt-4o" in override.stdout

    assert orgdeck("deploy", "preview", "nowhere", "support-bot").returncode == 4
    unknown = orgdeck("deploy", "preview", "production", "support-bot", "ghost")
    assert unknown.returncode == 4
    assert "ghost" in unknown.stderr


def test_deploy_preview_shows_policy_violations_and_exits_5_on_a_deny(orgdeck, client, api, org):
    versioned_agent(client, "support-bot", model="gpt-3.5-turbo")
    client.environments.create("production")
    examples = [
        {"name": "new", "input": {"agent": {"model": "gpt-4o"}}, "expect": "pass"},
        {"name": "old", "input": {"agent": {"model": "gpt-3.5-turbo"}}, "expect": "fail"},
    ]
    policy = {
        "orgSlug": org.slug,
        "name": "No retired models",
        "ruleText": "Agents must not use gpt-3.5.",
        "check": 'agent.model != "gpt-3.5-turbo"',
        "message": "gpt-3.5 is retired",
        "enforcement": "warn",
        "examples": examples,
    }
    saved = api("POST", "governance/policies", json=policy)
    warned = orgdeck("deploy", "preview", "production", "support-bot", "--exit-code")
    assert warned.returncode == 1, warned.stderr
    assert "warn support-bot  No retired models: gpt-3.5 is retired" in warned.stdout

    api("PATCH", f"governance/policies/{saved['id']}", json={"orgSlug": org.slug, "enforcement": "deny"})
    denied = orgdeck("deploy", "preview", "production", "support-bot", "--exit-code")
    assert denied.returncode == 5
    assert "deny support-bot" in denied.stdout


def test_deploy_wait_exits_by_how_the_job_ended(orgdeck, client, api, org):
    versioned_agent(client, "support-bot")
    client.environments.create("production")
    done = orgdeck("deploy", "production", "support-bot", "--wait", "--json")
    assert done.returncode == 0, done.stderr
    job = json.loads(done.stdout)
    assert job["status"] == "complete"
    assert job == api("GET", f"agents/deployment-jobs/{job['id']}", params={"orgSlug": org.slug})
    assert "complete" in done.stderr  # progress goes to stderr

    started = orgdeck("deploy", "production", "support-bot")
    assert started.returncode == 0
    assert "Started job job_" in started.stdout
    human = orgdeck("deploy", "run", "production", "support-bot", "--wait")
    assert human.returncode == 0
    assert "complete" in human.stdout and "support-bot" in human.stdout


def test_promote_deploys_what_runs_in_from_and_exits_like_deploy(orgdeck, client, api, org):
    versioned_agent(client, "support-bot")
    versioned_agent(client, "triage")
    staging = client.environments.create("staging").id
    production = client.environments.create("production").id
    assert wait_for_end(client, client.deployments.deploy(staging, ["support-bot"]).id).status == "complete"
    done = orgdeck("promote", "staging", "production", "--wait", "--json")
    assert done.returncode == 0, done.stderr
    job = json.loads(done.stdout)
    assert (job["status"], [a["stableKey"] for a in job["agents"]]) == ("complete", ["support-bot"])
    assert job == api("GET", f"agents/deployment-jobs/{job['id']}", params={"orgSlug": org.slug})
    started = orgdeck("promote", "staging", "production", "support-bot")
    assert started.returncode == 0 and "Started job job_" in started.stdout
    not_running = orgdeck("promote", "staging", "production", "triage")
    assert not_running.returncode == 1 and "triage" in not_running.stderr
    assert orgdeck("promote", "staging", "production", "nobody").returncode == 4
    assert orgdeck("promote", "staging", "nowhere").returncode == 4
    client.environments.update(production, promotes_from=staging, require_promotion=True, soak_minutes=60)
    held = orgdeck("promote", "staging", "production", "--json")
    assert held.returncode == 3 and "promotion_required" in held.stdout  # a 403, as for deploy


def test_deploy_wait_exits_1_for_error_and_partial_and_2_on_timeout(orgdeck, client):
    target = WebhookTarget()
    try:
        environment = webhook_environment(client, target)
        versioned_agent(client, "alpha")
        versioned_agent(client, "beta")
        target.failing = {"beta"}
        partial = orgdeck("deploy", environment, "alpha", "beta", "--wait")
        assert partial.returncode == 1, partial.stderr
        assert "partial" in partial.stdout and "refused by the target" in partial.stdout
        target.failing = {"alpha"}
        error = orgdeck("deploy", environment, "alpha", "--wait", "--json")
        assert error.returncode == 1
        assert json.loads(error.stdout)["status"] == "error"
        target.failing, target.delay = set(), 4.0
        timed_out = orgdeck("deploy", environment, "alpha", "--wait", "--timeout", "1")
        assert timed_out.returncode == 2
        assert "Timed out after 1 s" in timed_out.stderr
    finally:
        target.close()


def test_deploy_with_an_idempotency_key_deploys_once(orgdeck, client):
    versioned_agent(client, "support-bot")
    client.environments.create("production")
    first = orgdeck.json("deploy", "production", "support-bot", "--idempotency-key", "run-1234")
    second = orgdeck.json("deploy", "production", "support-bot", "--idempotency-key", "run-1234")
    assert first["id"] == second["id"]
    assert [job.id for job in client.deployments.jobs().items] == [first["id"]]


def test_jobs_show_and_list(orgdeck, client, api, org):
    versioned_agent(client, "support-bot")
    environment = client.environments.create("production")
    job = wait_for_end(client, client.deployments.deploy(environment.id, ["support-bot"]).id)
    shown = orgdeck.json("jobs", "show", job.id)
    assert shown == api("GET", f"agents/deployment-jobs/{job.id}", params={"orgSlug": org.slug})
    assert job.id in orgdeck("jobs", "show", job.id).stdout
    listed = orgdeck.json("jobs", "list", "--env", "production", "--status", "complete,error")
    params = {"orgSlug": org.slug, "environmentId": environment.id, "status": "complete,error", "limit": 20}
    assert listed == api("GET", "agents/deployment-jobs", params=params)
    assert job.id in orgdeck("jobs", "list").stdout
    assert orgdeck("jobs", "show", "job_nope").returncode == 4


def test_status_exits_1_on_drift_with_exit_code(orgdeck, client, api, org):
    versioned_agent(client, "support-bot")
    environment = client.environments.create("production")
    wait_for_end(client, client.deployments.deploy(environment.id, ["support-bot"]).id)
    in_sync = orgdeck("status", "--env", "production", "--exit-code")
    assert in_sync.returncode == 0, in_sync.stderr
    assert "in_sync v1" in in_sync.stdout

    client.agents.update("support-bot", provider_config={"model": "gpt-4o", "temperature": 0.9})
    drifted = orgdeck("status", "--exit-code")
    assert drifted.returncode == 1
    assert "drifted" in drifted.stdout
    assert orgdeck("status").returncode == 0  # without --exit-code, drift is reported, not failed
    matrix = orgdeck.json("status", "--env", "production")
    direct = api(
        "GET", "agents/deployments/status", params={"orgSlug": org.slug, "environmentId": environment.id}
    )
    assert matrix["items"] == direct["items"]
    assert matrix["counts"] == direct["counts"]
    assert orgdeck("status", "--env", "nowhere").returncode == 4


def test_policies_draft(orgdeck, api, org):
    text = orgdeck(
        "policies", "draft", "--instructions", "Agents must never reveal API keys.", "--name", "secrets"
    )
    assert text.returncode == 0, text.stderr
    assert "Title: secrets" in text.stdout
    assert "Drafted with" in text.stderr
    capped = orgdeck("policies", "draft", "--instructions", "Keep temperature at most 0.3.")
    assert capped.stdout.startswith("Title: Keep temperature at most 0.3")
    assert "Check: has(agent.providerConfig.temperature) && agent.providerConfig.temperature <= 0.3" in (
        capped.stderr
    )
    assert "Enforcement: deny · 1 passing and 1 failing examples" in capped.stderr
    drafted = orgdeck.json(
        "policies", "draft", "--instructions", "Never reveal API keys.", "--severity", "warning"
    )
    direct = api(
        "POST",
        "governance/policies/generate-prompt",
        json={"orgSlug": org.slug, "instructions": "Never reveal API keys.", "severity": "warning"},
    )
    assert {k: v for k, v in drafted.items() if k != "latencyMs"} == {
        k: v for k, v in direct.items() if k != "latencyMs"
    }
    assert orgdeck("policies", "draft").returncode == 2
    assert orgdeck("policies", "draft", "--instructions", "x", "--provider-id", "prov_nope").returncode == 4


def test_the_installed_command_needs_nothing_but_the_client(server, org, tmp_path):
    # Built from a copy of what `pip install .` reads, so the build leaves nothing in the checkout.
    source, site = tmp_path / "source", tmp_path / "site"
    shutil.copytree(ROOT / "api", source / "api", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    installed = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(site),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr
    assert sorted(p.name for p in site.iterdir() if not p.name.endswith(".dist-info")) == ["api", "bin"]
    env = {
        **base_env(tmp_path),
        "PYTHONPATH": str(site),
        "ORGDECK_API_URL": server.url,
        "ORGDECK_API_KEY": org.key,
    }
    # Run away from the checkout: only the installed package can be imported.
    ran = subprocess.run(
        [str(site / "bin" / "orgdeck"), "whoami", "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["orgSlug"] == org.slug
    # The package is at the one version the service answers too (api/version.py, read by pyproject).
    assert (site / f"orgdeck-{VERSION}.dist-info").is_dir()
    version = subprocess.run(
        [str(site / "bin" / "orgdeck"), "--version"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert version.stdout.strip() == f"orgdeck {VERSION}"


def test_the_command_line_loads_no_service_console_or_pandas(orgdeck, client):
    versioned_agent(client, "support-bot")
    client.environments.create("production")
    script = (
        "import sys\n"
        "from api.cli import cli\n"
        "for args in (['whoami'], ['status'], ['deploy', 'preview', 'production', 'support-bot']):\n"
        "    try:\n"
        "        cli.main(args=args, prog_name='orgdeck')\n"
        "    except SystemExit as done:\n"
        "        assert done.code in (0, None), (args, done.code)\n"
        "banned = {'service', 'streamlit', 'pandas', 'components', 'pages', 'fastapi', 'sqlalchemy'}\n"
        "print(sorted(name for name in sys.modules if name.split('.')[0] in banned))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=orgdeck.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[]"


def test_whoami_answers_as_the_client_does(orgdeck, server, org):
    with OrgdeckClient(server.url, org.key) as direct:
        assert orgdeck.json("whoami") == direct.whoami().model_dump(mode="json", by_alias=True)
    assert orgdeck("whoami").stdout.startswith(f"{org.slug} (Test Org), key 'admin'")


def test_promote_with_a_strategy_deploys_in_waves_and_exits_1_when_rolled_back(orgdeck, client):
    target = WebhookTarget()
    try:
        staging = client.environments.create("staging").id
        production = webhook_environment(client, target)
        keys = ["alpha", "beta", "gamma"]
        for key in keys:
            versioned_agent(client, key)
        assert wait_for_end(client, client.deployments.deploy(production, keys).id).status == "complete"
        for key in keys:
            client.agents.update(key, provider_config={"model": "gpt-4o"})
            client.agents.snapshot(key)
        assert wait_for_end(client, client.deployments.deploy(staging, keys).id).status == "complete"
        target.failing = {"gamma"}
        spec = "waveSize=2,pauseSeconds=0,onFailure=rollback"
        rolled = orgdeck("promote", "staging", production, "--strategy", spec, "--wait", "--json")
        assert rolled.returncode == 1, rolled.stderr
        job = json.loads(rolled.stdout)
        assert job["status"] == "rolled_back"
        assert [wave["status"] for wave in job["rollout"]["waves"]] == ["rolled_back", "rolled_back"]
        running = {
            p.stable_key: p.deployed_version
            for p in client.deployments.status(environment_id=production).items
        }
        assert running == {"alpha": 1, "beta": 1, "gamma": 1}
        target.failing = set()
        done = orgdeck("promote", "staging", production, "--strategy", '{"waveSize": "50%"}', "--wait")
        assert done.returncode == 0, done.stderr
        assert "wave 2: complete" in done.stdout
        bad = orgdeck("promote", "staging", production, "--strategy", "waveSize=0", "--json")
        assert bad.returncode == 1 and "strategy.waveSize" in bad.stdout + bad.stderr
        assert orgdeck("promote", "staging", production, "--strategy", "waveSize").returncode == 2
        assert orgdeck("promote", "staging", production, "--strategy", "{nope").returncode == 2
    finally:
        target.close()


def test_rollout_pause_resume_abort_exit_like_deploy(orgdeck, client):
    for key in ("alpha", "beta"):
        versioned_agent(client, key)
    environment = client.environments.create("staging").id
    job = client.deployments.deploy(
        environment, ["alpha", "beta"], strategy={"waveSize": 1, "pauseSeconds": 600}
    )
    paused = orgdeck("rollout", "pause", job.id, "--json")
    assert paused.returncode == 0, paused.stderr
    assert json.loads(paused.stdout)["status"] == "paused"
    again = orgdeck("rollout", "pause", job.id, "--json")
    assert again.returncode == 1
    assert json.loads(again.stdout)["error"]["code"] == "job_not_pausable"
    aborted = orgdeck("rollout", "abort", job.id, "--json")
    assert aborted.returncode == 0 and json.loads(aborted.stdout)["status"] == "aborted"
    assert orgdeck("rollout", "resume", job.id).returncode == 1
    assert orgdeck("rollout", "abort", "job_nosuchjob", "--json").returncode == 4
    other = client.deployments.deploy(
        environment, ["alpha", "beta"], strategy={"waveSize": 1, "pauseSeconds": 600}
    )
    assert orgdeck("rollout", "pause", other.id).returncode == 0
    resumed = orgdeck("rollout", "resume", other.id)
    assert resumed.returncode == 0 and other.id in resumed.stdout

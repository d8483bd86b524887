"""`orgdeck` setting up what it deploys: every resource's commands as a subprocess against a live
service, their JSON (the API's own answer), their errors under `--json` and their exit codes; lists
paged by cursor and `--all`; and the README's pipeline run as written on an empty organization."""

# ruff: noqa: F811 (the fixtures `orgdeck`, `api`, `team` and `production`, imported, are the tests' arguments)

from __future__ import annotations

import json
import re
import shlex
from typing import Any

import click
import pytest

from api.cli import cli
from tests.conftest import new_org
from tests.processes import ROOT
from tests.test_changes import Team, production, team  # noqa: F401 (fixtures)
from tests.test_deployments import versioned_agent, wait_for_end
from tests.test_orgdeck_cli import Orgdeck, api, base_env, orgdeck  # noqa: F401 (fixtures)

UNKNOWN_KEY = "odk_" + "A" * 38


def every_command(
    group: click.Group, path: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], click.Command]]:
    found = []
    for name, command in group.commands.items():
        found.append(((*path, name), command))
        if isinstance(command, click.Group):
            found += every_command(command, (*path, name))
    return found


def test_every_command_has_examples_and_every_list_pages():
    commands = every_command(cli)
    assert len(commands) > 60
    for path, command in commands:
        assert "Example" in (command.epilog or ""), path
        if path[-1] == "list":
            assert {"limit", "cursor", "every", "as_json"} <= {param.name for param in command.params}, path


def test_completion_is_the_documented_line(orgdeck):
    script = orgdeck(_ORGDECK_COMPLETE="bash_source")
    assert script.returncode == 0 and "_orgdeck_completion" in script.stdout
    assert 'eval "$(_ORGDECK_COMPLETE=bash_source orgdeck)"' in (ROOT / "docs" / "reference.md").read_text()
    words = orgdeck(_ORGDECK_COMPLETE="bash_complete", COMP_WORDS="orgdeck environments ", COMP_CWORD="2")
    assert {"plain,create", "plain,list", "plain,signing-key"} <= set(words.stdout.split())


def failed(result: Any, exit_code: int, code: str) -> str:
    """The error a `--json` command printed on stdout, checked for its exit code and code."""
    assert result.returncode == exit_code, (result.stdout, result.stderr)
    error = json.loads(result.stdout)["error"]
    assert error["code"] == code
    assert set(error) == {"code", "message"} and error["message"]
    return error["message"]


@pytest.mark.parametrize(
    ("args", "exit_code", "code"),
    [
        (["agents", "get", "ghost"], 4, "not_found"),
        (["agents", "versions", "get", "ghost", "1"], 4, "not_found"),
        (["environments", "get", "nowhere"], 4, "not_found"),
        (["deploy", "preview", "production", "ghost"], 4, "not_found"),
        (["deploy", "production", "ghost"], 4, "not_found"),
        (["deploy", "rollback", "production", "ghost"], 4, "not_found"),
        (["fleets", "get", "flt_nope"], 4, "not_found"),
        (["members", "get", "mem_nope"], 4, "not_found"),
        (["changes", "approve", "chg_nope"], 4, "not_found"),
        (["prompts", "label", "nowhere", "triage", "production", "1"], 4, "not_found"),
        (["registries", "create", "Not A Slug!"], 1, "invalid_request"),
        (["agents", "create", "bot", "--provider", "openai", "--config", "[1]"], 2, "usage"),
        (["agents", "list", "--no-such-option"], 2, "usage"),
        (["environments", "list", "--cursor", "next-please"], 2, "usage"),
        (["whoami"], 3, "unauthorized"),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else str(value),
)
def test_errors_under_json_are_an_error_object_on_stdout_with_the_exit_code(
    orgdeck, client, args, exit_code, code
):
    client.environments.create("production")
    key = {"ORGDECK_API_KEY": UNKNOWN_KEY} if code == "unauthorized" else {}
    result = orgdeck(*args, "--json", **key)
    message = failed(result, exit_code, code)
    if exit_code == 4:
        assert any(name in message for name in ("ghost", "nowhere", "nope"))
    assert result.stderr == ""
    # Without --json the same error is text on stderr, stdout left empty.
    text = orgdeck(*args, **key)
    assert (text.returncode, text.stdout) == (exit_code, "")
    assert "Error" in text.stderr


def test_registries_and_prompt_labels(orgdeck, client, api, org, tmp_path):
    created = orgdeck.json("registries", "create", "support", "--description", "Support prompts")
    ref = f"{org.slug}/support"
    assert created["registryRef"] == ref
    listed = orgdeck.json("registries", "list")
    assert listed["items"] == api("GET", "registries", params={"orgSlug": org.slug})["items"]
    assert listed["nextCursor"] is None
    updated = orgdeck.json("registries", "update", "support", "--protected-label", "production")
    assert updated["protectedLabels"] == ["production"]
    assert orgdeck.json("registries", "update", ref, "--no-protected-labels")["protectedLabels"] == []

    for text in ("First.", "Second."):
        orgdeck("prompts", "publish", "support", "triage", "-", "--label", "production", stdin=text)
    moved = orgdeck.json("prompts", "label", "support", "triage", "production", "1")
    assert moved["version"] == "1" and "production" in moved["labels"]
    assert orgdeck("prompts", "get", "support", "triage").stdout == "First."
    assert (
        "production → triage version 2"
        in orgdeck("prompts", "label", ref, "triage", "production", "2").stdout
    )
    failed(orgdeck("prompts", "label", "support", "triage", "production", "9", "--json"), 4, "not_found")

    assert orgdeck.json("registries", "delete", "support")["deletedAt"] is not None
    failed(orgdeck("prompts", "get", "support", "triage", "--json"), 4, "not_found")
    assert orgdeck("registries", "restore", "support").returncode == 0
    assert orgdeck("prompts", "get", "support", "triage").stdout == "Second."


def test_environments_and_signing_keys(orgdeck, api, org):
    created = orgdeck.json("environments", "create", "staging", "--description", "Before production")
    assert created == api("GET", f"environments/{created['id']}", params={"orgSlug": org.slug})
    assert orgdeck.json("environments", "get", "staging") == created
    assert orgdeck.json("environments", "get", created["id"])["name"] == "staging"
    shown = orgdeck("environments", "get", "staging")
    assert "Before production" in shown.stdout

    updated = orgdeck.json(
        "environments",
        "update",
        "staging",
        "--target",
        "webhook",
        "--webhook-url",
        "https://deploy.example.com/hook",
    )
    assert (updated["target"], updated["webhookUrl"]) == ("webhook", "https://deploy.example.com/hook")
    key = orgdeck.json("environments", "signing-key", "staging")
    assert key["environmentId"] == created["id"] and key["secret"]
    assert orgdeck("environments", "signing-key", "staging").stdout.strip() != key["secret"]  # rotated
    assert (
        orgdeck.json("environments", "update", "staging", "--name", "qa", "--protected")["protected"] is True
    )
    # Protected, its key changes only through a change request: refused (403) as authorization is.
    failed(orgdeck("environments", "signing-key", "qa", "--json"), 3, "approval_required")

    listed = orgdeck.json("environments", "list", "--target", "webhook")
    assert [item["name"] for item in listed["items"]] == ["qa"]
    assert "qa" in orgdeck("environments", "list").stdout
    production = orgdeck.json("environments", "create", "production")
    gated = orgdeck.json(
        "environments",
        "update",
        "production",
        "--promotes-from",
        "qa",
        "--require-promotion",
        "--soak-minutes",
        "30",
        "--production",
        "--verification-webhook-url",
        "https://verify.example.com/wave",
    )
    assert (gated["promotesFrom"], gated["requirePromotion"], gated["soakMinutes"], gated["production"]) == (
        created["id"],
        True,
        30,
        True,
    )
    assert gated["verificationWebhookUrl"] == "https://verify.example.com/wave"
    cleared = orgdeck.json(
        "environments", "update", production["id"], "--promotes-from", "", "--verification-webhook-url", ""
    )
    assert (cleared["promotesFrom"], cleared["verificationWebhookUrl"]) == (None, None)
    failed(
        orgdeck("environments", "update", "production", "--promotes-from", "nowhere", "--json"),
        4,
        "not_found",
    )
    orgdeck.json("environments", "create", "scratch")
    assert "Deleted environment scratch" in orgdeck("environments", "delete", "scratch").stdout
    failed(orgdeck("environments", "delete", "scratch", "--json"), 4, "not_found")


def test_agents_and_their_versions(orgdeck, api, org):
    created = orgdeck.json(
        "agents", "create", "support-bot", "--provider", "openai", "--config", '{"model": "gpt-4o"}',
        "--tag", "team:support", "--prompt-ref", "system=acme/support/triage@production",
    )  # fmt: skip
    assert created == api("GET", "agents/support-bot", params={"orgSlug": org.slug})
    assert created["promptReferences"] == {"system": "acme/support/triage@production"}
    failed(orgdeck("agents", "create", "support-bot", "--provider", "openai", "--json"), 1, "already_exists")

    first = orgdeck.json("agents", "versions", "create", "support-bot")
    assert first["version"] == 1
    updated = orgdeck.json("agents", "update", "support-bot", "--config", '{"model": "gpt-4o-mini"}')
    assert updated["providerConfig"] == {"model": "gpt-4o-mini"} and updated["hasUnversionedChanges"]
    assert orgdeck.json("agents", "snapshot", "support-bot")["version"] == 2
    versions = orgdeck.json("agents", "versions", "list", "support-bot")
    assert versions == {
        **api("GET", "agents/support-bot/versions", params={"orgSlug": org.slug}),
        "nextCursor": None,
    }
    assert [item["version"] for item in versions["items"]] == [2, 1]
    assert orgdeck.json("agents", "versions", "get", "support-bot", "1") == first
    assert orgdeck.json("agents", "get", "support-bot")["latestVersion"] == 2

    assert "Archived agent support-bot" in orgdeck("agents", "delete", "support-bot").stdout
    failed(orgdeck("agents", "get", "support-bot", "--json"), 4, "not_found")


def test_fleets(orgdeck, client, api, org):
    environment = client.environments.create("production")
    created = orgdeck.json("fleets", "create", "support", "--env", "production", "--description", "Help")
    assert created == api("GET", f"fleets/{created['id']}", params={"orgSlug": org.slug})
    assert [target["id"] for target in created["environments"]] == [environment.id]
    renamed = orgdeck.json("fleets", "update", created["id"], "--name", "support-eu")
    assert renamed["name"] == "support-eu"
    assert orgdeck.json("fleets", "get", created["id"])["name"] == "support-eu"
    assert "support-eu" in orgdeck("fleets", "list").stdout
    failed(orgdeck("fleets", "create", "other", "--env", "nowhere", "--json"), 4, "not_found")
    assert orgdeck.json("fleets", "delete", created["id"])["id"] == created["id"]
    assert orgdeck.json("fleets", "list")["items"] == []


def test_channels_and_subscriptions(orgdeck, api, org):
    channel = orgdeck.json("channels", "create", "oncall", "email", "--recipient", "oncall@example.com")
    assert channel["kind"] == "email" and channel["config"]["recipients"] == ["oncall@example.com"]
    listed = orgdeck.json("channels", "list")
    assert listed["items"] == api("GET", "notifications/channels", params={"orgSlug": org.slug})["items"]
    disabled = orgdeck.json("channels", "update", channel["id"], "--disable", "--name", "pager")
    assert (disabled["name"], disabled["state"]) == ("pager", "disabled")

    subscribed = orgdeck.json("subscriptions", "create", channel["id"], "deployment.error")
    assert subscribed["eventType"] == "deployment.error" and subscribed["enabled"]
    listed = orgdeck.json("subscriptions", "list", "--channel", channel["id"])
    assert [item["id"] for item in listed["items"]] == [subscribed["id"]]
    assert orgdeck("subscriptions", "create", channel["id"], "no.such-event").returncode == 2
    assert (
        orgdeck.json("subscriptions", "delete", channel["id"], "deployment.error")["id"] == subscribed["id"]
    )
    assert orgdeck("channels", "delete", channel["id"]).returncode == 0
    failed(orgdeck("channels", "delete", channel["id"], "--json"), 4, "not_found")


def test_keys_and_members(orgdeck, server, api, org):
    member = orgdeck.json("members", "create", "ada@example.com", "Ada Lovelace", "--role", "author")
    assert member == api("GET", f"members/{member['id']}", params={"orgSlug": org.slug})
    assert orgdeck.json("members", "get", member["id"]) == member
    assert orgdeck.json("members", "update", member["id"], "--role", "operator")["role"] == "operator"
    personal = orgdeck.json("keys", "create", "ada-laptop", "--member", member["id"])
    service = orgdeck.json("keys", "create", "deploy-bot", "--role", "operator")
    assert orgdeck("keys", "create", "bare").stdout.strip().startswith("odk_")  # the value, to capture
    keys = orgdeck.json("keys", "list")
    assert {"ada-laptop", "deploy-bot"} <= {item["name"] for item in keys["items"]}
    assert all("key" not in item for item in keys["items"])  # never a value
    assert orgdeck("whoami", ORGDECK_API_KEY=service["key"]).returncode == 0

    assert orgdeck.json("keys", "delete", service["id"])["id"] == service["id"]
    failed(orgdeck("whoami", "--json", ORGDECK_API_KEY=service["key"]), 3, "unauthorized")
    assert orgdeck.json("members", "delete", member["id"])["active"] is False
    assert orgdeck("whoami", ORGDECK_API_KEY=personal["key"]).returncode == 3
    assert member["id"] not in orgdeck("members", "list").stdout
    assert member["id"] in orgdeck("members", "list", "--include-inactive").stdout


def test_changes_list_approve_and_reject(orgdeck, client, team, production):
    ana, bo = team.member("ana", "operator"), team.member("bo", "operator")
    as_bo = {"ORGDECK_API_KEY": team.keys["bo"]}
    body = {"environmentId": production, "agentStableKeys": ["triage"]}
    first = ana.change_requests.open("deployment", body, "First release")
    second = ana.change_requests.open("deployment", body, "Second thoughts")
    listed = orgdeck.json("changes", "list", "--status", "open", "--limit", "1")
    assert [item["id"] for item in listed["items"]] == [second.id]
    following = orgdeck.json("changes", "list", "--status", "open", "--cursor", listed["nextCursor"])
    assert [item["id"] for item in following["items"]] == [first.id]
    assert orgdeck.json("changes", "get", first.id)["reason"] == "First release"

    denied = orgdeck("changes", "approve", first.id, "--json", ORGDECK_API_KEY=team.keys["ana"])
    assert denied.returncode == 3  # the requester does not review their own request
    approved = orgdeck("changes", "approve", first.id, "--comment", "Checked", "--json", **as_bo)
    assert approved.returncode == 0, approved.stdout
    assert json.loads(approved.stdout)["status"] == "applied"
    rejected = orgdeck("changes", "reject", second.id, **as_bo)
    assert rejected.returncode == 0 and "rejected" in rejected.stdout
    failed(orgdeck("changes", "reject", second.id, "--json", **as_bo), 1, "not_open")
    assert bo.change_requests.get(second.id).status == "rejected"


def test_deploy_rollback_goes_back_to_the_version_that_ran_before(orgdeck, client):
    versioned_agent(client, "support-bot")
    environment = client.environments.create("production")
    failed(orgdeck("deploy", "rollback", "production", "support-bot", "--json"), 1, "no_previous_version")
    wait_for_end(client, client.deployments.deploy(environment.id, ["support-bot"]).id)
    client.agents.update("support-bot", provider_config={"model": "gpt-4o"})
    client.agents.snapshot("support-bot")
    wait_for_end(client, client.deployments.deploy(environment.id, ["support-bot"]).id)

    rolled = orgdeck("deploy", "rollback", "production", "support-bot", "--wait", "--json")
    assert rolled.returncode == 0, rolled.stdout
    job = json.loads(rolled.stdout)
    assert (job["status"], job["agents"][0]["version"]) == ("complete", 1)
    forward = orgdeck.json("deploy", "rollback", "production", "support-bot", "--to", "2")
    assert wait_for_end(client, forward["id"]).agents[0].version == 2


def test_lists_page_by_cursor_and_all(orgdeck, client):
    for number in range(5):
        client.environments.create(f"env-{number}")
    first = orgdeck.json("environments", "list", "--limit", "2")
    assert [item["name"] for item in first["items"]] == ["env-0", "env-1"]
    second = orgdeck.json("environments", "list", "--limit", "2", "--cursor", first["nextCursor"])
    assert [item["name"] for item in second["items"]] == ["env-2", "env-3"]
    last = orgdeck.json("environments", "list", "--limit", "2", "--cursor", second["nextCursor"])
    assert [item["name"] for item in last["items"]] == ["env-4"] and last["nextCursor"] is None
    every = orgdeck.json("environments", "list", "--limit", "2", "--all")
    assert [item["name"] for item in every["items"]] == [f"env-{number}" for number in range(5)]
    assert every["nextCursor"] is None
    text = orgdeck("environments", "list", "--limit", "2")
    assert f"--cursor {first['nextCursor']}" in text.stdout

    # A list the service answers whole (keys) and one it pages by its own cursor (jobs) page alike.
    for name in ("a", "b"):
        client.api_keys.create(name)
    keys = orgdeck.json("keys", "list", "--limit", "2", "--all")
    assert len(keys["items"]) == 3
    versioned_agent(client, "support-bot")
    environment = client.environments.list(search="env-0").items[0]
    jobs = [client.deployments.deploy(environment.id, ["support-bot"]).id for _ in range(3)]
    page = orgdeck.json("jobs", "list", "--limit", "2")
    assert [item["id"] for item in page["items"]] == jobs[:0:-1]
    assert [item["id"] for item in orgdeck.json("jobs", "list", "--limit", "2", "--all")["items"]] == jobs[
        ::-1
    ]


def pipeline_blocks() -> list[list[str]]:
    """The commands of the README's pipeline example, block by block, as a reader would copy them."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## From a pipeline", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, re.DOTALL)
    assert blocks, "README.md's pipeline section has its commands in bash blocks"
    return [[line for line in block.splitlines() if line.strip()] for block in blocks]


def test_the_readmes_pipeline_sets_up_and_deploys_an_empty_organization(server, db, tmp_path):
    empty = new_org(db)
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "triage.md").write_text("Sort the ticket by urgency.\n")
    pipeline = Orgdeck({**base_env(tmp_path), "ORGDECK_API_URL": server.url, "ORGDECK_API_KEY": empty.key})
    *setup, every_build = pipeline_blocks()
    assert any(line.startswith("orgdeck deploy production") for line in every_build)
    # Set up once, then build twice: the second build deploys what the first left in place.
    for line in [*(line for block in setup for line in block), *every_build, *every_build]:
        args = shlex.split(line)
        assert args[0] == "orgdeck", line
        ran = pipeline(*args[1:], cwd=tmp_path)
        assert ran.returncode == 0, (line, ran.stdout, ran.stderr)
    status = json.loads(pipeline("status", "--env", "production", "--json").stdout)
    assert [(pair["stableKey"], pair["state"]) for pair in status["items"]] == [("support-bot", "in_sync")]

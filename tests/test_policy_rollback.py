"""Rolling back and redeploying have no routes of their own: the console's History "Roll back" and
`orgdeck deploy rollback` deploy a past version through `POST /agents/deployments` (or, where the
environment is protected, a deployment change request), so a deny policy refuses each of them."""

# ruff: noqa: F811 (the fixtures `orgdeck` and `team`, imported, are the tests' arguments)

from __future__ import annotations

import json

import pytest

from api.errors import Forbidden
from tests.test_changes import team  # noqa: F401 (a fixture)
from tests.test_deployments import versioned_agent, wait_for_end
from tests.test_orgdeck_cli import orgdeck  # noqa: F401 (a fixture)
from tests.test_policy_checks import save_policy


def two_versions(client) -> None:
    """`triage` version 1 on gpt-3.5-turbo (which the policy denies), version 2 on gpt-4o-mini."""
    versioned_agent(client, "triage", model="gpt-3.5-turbo")
    client.agents.update("triage", provider_config={"model": "gpt-4o-mini", "temperature": 0.2})
    client.agents.snapshot("triage")


def deny_policy(http, org) -> dict:
    answer = save_policy(http, org, enforcement="deny")
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_a_rollback_into_a_deny_violation_is_refused(http, org, client):
    production = client.environments.create("production").id
    two_versions(client)
    wait_for_end(client, client.deployments.deploy(production, ["triage"], agent_versions={"triage": 1}).id)
    wait_for_end(client, client.deployments.deploy(production, ["triage"]).id)
    deny_policy(http, org)

    body = {
        "orgSlug": org.slug,
        "environmentId": production,
        "agentStableKeys": ["triage"],
        "agentVersions": {"triage": 1},  # what the History's "Roll back" sends
    }
    refused = http.post("agents/deployments", json=body, headers=org.headers)
    assert refused.status_code == 403 and refused.json()["code"] == "policy_violation"
    jobs = client.deployments.jobs(environment_id=production).items
    assert [[agent.version for agent in job.agents] for job in jobs] == [[2], [1]]


def test_redeploying_what_already_breaks_a_deny_policy_is_refused(http, org, client):
    production = client.environments.create("production").id
    versioned_agent(client, "triage", model="gpt-3.5-turbo")
    wait_for_end(client, client.deployments.deploy(production, ["triage"]).id)
    deny_policy(http, org)

    body = {"orgSlug": org.slug, "environmentId": production, "agentStableKeys": ["triage"]}
    refused = http.post("agents/deployments", json=body, headers=org.headers)
    assert refused.status_code == 403 and refused.json()["code"] == "policy_violation"


def test_a_requested_rollback_cannot_be_approved_into_a_deny_violation(http, org, client, team):
    production = client.environments.create("production").id
    two_versions(client)
    wait_for_end(client, client.deployments.deploy(production, ["triage"], agent_versions={"triage": 1}).id)
    wait_for_end(client, client.deployments.deploy(production, ["triage"]).id)
    client.environments.update(production, protected=True)
    deny_policy(http, org)
    ana, bo = team.member("ana", "operator"), team.member("bo", "operator")

    change = {"environmentId": production, "agentStableKeys": ["triage"], "agentVersions": {"triage": 1}}
    opened = ana.change_requests.open("deployment", change, "Roll back")
    assert [v["enforcement"] for v in opened.preview["violations"]] == ["deny"]
    with pytest.raises(Forbidden) as refused:
        bo.change_requests.approve(opened.id)
    assert refused.value.code == "policy_violation"
    assert ana.change_requests.get(opened.id).status == "open"


def test_orgdeck_deploy_rollback_is_refused_by_a_deny_policy(http, org, client, orgdeck):
    production = client.environments.create("production").id
    two_versions(client)
    wait_for_end(client, client.deployments.deploy(production, ["triage"], agent_versions={"triage": 1}).id)
    wait_for_end(client, client.deployments.deploy(production, ["triage"]).id)
    deny_policy(http, org)

    result = orgdeck("deploy", "rollback", "production", "triage", "--json")
    assert result.returncode == 3, (result.stdout, result.stderr)
    assert json.loads(result.stdout)["error"]["code"] == "policy_violation"

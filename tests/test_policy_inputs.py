"""What a policy check reads beyond the agent's config: its prompts resolved to the version a
deployment would run (pin, label or version, newest) with their content, and its tools' deployment
records in the environment; the same for what already runs (compliance)."""

from __future__ import annotations

from typing import Any

import httpx
from sqlalchemy import select

from api import OrgdeckClient
from service.events.models import EventRow
from service.storage.db import Database
from tests.conftest import Org
from tests.test_changes import team  # noqa: F401 (a fixture)
from tests.test_deployments import versioned_agent, wait_for_end
from tests.test_policy_checks import compliance, save_policy

NO_PASSWORD = '!agent.prompts.exists(p, p.content.contains("password"))'
TOOLS_RELEASED = 'agent.tools.all(t, t.deployment != null && t.deployment.version != "0.9")'


def agent_with(
    prompts: list[dict[str, Any]] | None = None,
    tools: list[dict[str, Any]] | None = None,
    actor: str = "ops@example.com",
) -> dict[str, Any]:
    return {
        "agent": {"stableKey": "a", "model": "m", "tags": [], "prompts": prompts or [], "tools": tools or []},
        "environment": {"name": "production", "protected": False, "target": "builtin"},
        "deployment": {"actor": actor, "viaChangeRequest": False, "action": "deploy"},
    }


def prompt_policy(http: httpx.Client, org: Org) -> dict[str, Any]:
    examples = [
        {"name": "kind", "input": agent_with([{"content": "Be kind."}]), "expect": "pass"},
        {"name": "leaky", "input": agent_with([{"content": "Say the password."}]), "expect": "fail"},
    ]
    answer = save_policy(
        http, org, check=NO_PASSWORD, message="a prompt gives the password away", examples=examples
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


def published_prompts(client: OrgdeckClient) -> str:
    """Versions 1, 2 and 3 of `system`; only version 2 mentions a password; `production` is on 2."""
    prompts = client.registries.create("prompts").registry_ref
    for text in ("Be kind.", "Be kind. Tell anyone the password.", "Be kind, always."):
        client.registries.publish(prompts, "system", text)
    client.registries.move_label(prompts, "system", "production", "2")
    return prompts


def violating(client: OrgdeckClient, environment: str, keys: list[str], **request: Any) -> list[str]:
    preview = client.deployments.preview(environment, keys, **request)
    return [violation.agent for violation in preview.violations]


def test_prompts_are_checked_as_they_would_be_deployed(http, org, client):
    environment = client.environments.create("production").id
    prompts = published_prompts(client)
    references = {
        "labelled": f"{prompts}/system@production",
        "versioned": f"{prompts}/system@1",
        "newest": f"{prompts}/system",
    }
    for key, reference in references.items():
        client.agents.create(
            key, "openai", provider_config={"model": "m"}, prompt_references={"s": reference}
        )
        client.agents.snapshot(key)
    policy = prompt_policy(http, org)

    assert violating(client, environment, list(references)) == ["labelled"]
    assert violating(client, environment, ["labelled"], prompt_name="s", version="3") == []
    assert violating(client, environment, ["newest"], prompt_name="s", version="2") == ["newest"]
    refused = http.post(
        "agents/deployments",
        json={"orgSlug": org.slug, "environmentId": environment, "agentStableKeys": ["labelled"]},
        headers=org.headers,
    )
    assert refused.status_code == 403
    assert refused.json()["details"][0]["message"] == "a prompt gives the password away"

    # What runs is read as it resolves now: moving the label onto version 2 breaks the policy.
    wait_for_end(client, client.deployments.deploy(environment, ["newest"]).id)
    assert compliance(http, org)["violations"] == []
    client.registries.move_label(prompts, "system", "stable", "2")
    client.agents.update("newest", prompt_references={"s": f"{prompts}/system@stable"})
    client.agents.snapshot("newest")
    assert violating(client, environment, ["newest"]) == ["newest"]
    assert [v["policyId"] for v in compliance(http, org)["violations"]] == []
    http.patch(
        f"governance/policies/{policy['id']}",
        json={"orgSlug": org.slug, "enforcement": "warn"},
        headers=org.headers,
    ).raise_for_status()
    wait_for_end(client, client.deployments.deploy(environment, ["newest"]).id)
    listed = compliance(http, org)["violations"]
    assert [(v["agent"], v["policyId"]) for v in listed] == [("newest", policy["id"])]
    client.registries.move_label(prompts, "system", "stable", "3")
    assert compliance(http, org)["violations"] == []


def test_tools_carry_their_deployment_record_in_the_environment(http, org, client):
    environment = client.environments.create("production").id
    client.environments.create("staging")
    client.tools.create("Search", "search")
    examples = [
        {"name": "released", "input": agent_with(tools=[{"deployment": {"version": "1"}}]), "expect": "pass"},
        {"name": "beta", "input": agent_with(tools=[{"deployment": {"version": "0.9"}}]), "expect": "fail"},
        {"name": "unrecorded", "input": agent_with(tools=[{"deployment": None}]), "expect": "fail"},
    ]
    answer = save_policy(http, org, check=TOOLS_RELEASED, message="a tool is not released", examples=examples)
    assert answer.status_code == 200, answer.text
    client.agents.create("alpha", "openai", provider_config={"model": "m"})
    client.agents.snapshot("alpha")

    def record(environment_name: str, version: str) -> None:
        client.tool_deployments.record(
            tool_name="Search",
            tool_key="search",
            environment=environment_name,
            provider="openai",
            tool_id="t-1",
            version=version,
            hash=f"h-{version}",
            tool_provider_config={"apiKey": "sk-never-shown"},
        )

    assert violating(client, environment, ["alpha"], tool_refs=["search"]) == ["alpha"]
    record("staging", "1")  # another environment's record does not count here
    assert violating(client, environment, ["alpha"], tool_refs=["search"]) == ["alpha"]
    record("production", "0.9")
    assert violating(client, environment, ["alpha"], tool_refs=["search"]) == ["alpha"]
    record("production", "1")
    assert violating(client, environment, ["alpha"], tool_refs=["search"]) == []
    assert violating(client, environment, ["alpha"]) == []


def test_a_change_request_preview_sees_its_requester_as_the_actor(http, org, client, team):  # noqa: F811
    versioned_agent(client, "triage")
    production = client.environments.create("production").id
    client.environments.update(production, protected=True)
    examples = [
        {"name": "others", "input": agent_with(), "expect": "pass"},
        {"name": "ana", "input": agent_with(actor="ana@example.com"), "expect": "fail"},
    ]
    policy = save_policy(
        http,
        org,
        check='deployment.actor != "ana@example.com"',
        message='="deployed by " + deployment.actor',
        examples=examples,
        enforcement="warn",
    )
    assert policy.status_code == 200, policy.text
    ana, bo = team.member("ana", "operator"), team.member("bo", "operator")
    change = {"environmentId": production, "agentStableKeys": ["triage"]}

    (seen,) = ana.change_requests.open("deployment", change, "Release").preview["violations"]
    assert seen["message"] == "deployed by ana@example.com"
    assert bo.change_requests.open("deployment", change, "Release").preview["violations"] == []


def running_events(db: Database, org: Org) -> list[tuple[str, str, str, str]]:
    """The `policy.violation` events of new violations in what runs: (cause, policy, agent, environment)."""
    with db.session() as session:
        query = select(EventRow).where(EventRow.type == "policy.violation").order_by(EventRow.occurred_at)
        payloads = [event.payload for event in session.scalars(query) if event.payload.get("cause")]
    return [
        (p["cause"], v["policyName"], v["agent"], v["environmentName"])
        for p in payloads
        for v in p["violations"]
        if v["policyName"].startswith(org.slug)
    ]


def test_new_violations_in_what_runs_are_announced_once(http, org, client, db):
    production = client.environments.create("production").id
    versioned_agent(client, "old", model="gpt-3.5-turbo")
    versioned_agent(client, "later", model="gpt-3.5-turbo")
    versioned_agent(client, "fine")
    wait_for_end(client, client.deployments.deploy(production, ["old", "fine"]).id)
    name = f"{org.slug}-retired"
    policy = save_policy(http, org, name=name, enforcement="audit").json()
    assert running_events(db, org) == []  # audit records, announces nothing

    def patch(**fields: Any) -> None:
        body = {"orgSlug": org.slug, **fields}
        http.patch(f"governance/policies/{policy['id']}", json=body, headers=org.headers).raise_for_status()

    patch(enforcement="warn")
    assert running_events(db, org) == [("policySaved", name, "old", "production")]
    patch(message="a retired model")  # still the same violation: nothing new
    wait_for_end(client, client.deployments.deploy(production, ["old", "fine"]).id)
    assert len(running_events(db, org)) == 1

    wait_for_end(client, client.deployments.deploy(production, ["later"]).id)
    assert running_events(db, org)[1:] == [("deploymentCompleted", name, "later", "production")]

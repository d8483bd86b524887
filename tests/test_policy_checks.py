"""Policy checks: CEL checks compiled and tested on save, enforced on every deployment about to run,
scoped, excepted, and measured against what runs now."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from api import OrgdeckClient
from api.errors import Forbidden
from service.events.models import EventRow
from service.governance.models import PolicyExceptionRow
from tests.conftest import Org
from tests.processes import fresh_python_prints
from tests.test_changes import Team
from tests.test_deployments import WebhookTarget, versioned_agent, wait_for_end, webhook_environment

NO_GPT35 = 'agent.model != "gpt-3.5-turbo"'
COOL = "double(agent.providerConfig.temperature) <= 0.3"


def subject(
    model: str = "gpt-4o-mini", temperature: float = 0.2, environment: str = "production"
) -> dict[str, Any]:
    return {
        "agent": {
            "stableKey": "a",
            "model": model,
            "providerConfig": {"temperature": temperature},
            "tags": [],
        },
        "environment": {"name": environment, "protected": False, "target": "builtin"},
        "deployment": {"actor": "ops@example.com", "viaChangeRequest": False, "action": "deploy"},
    }


EXAMPLES = [
    {"name": "current model", "input": subject(), "expect": "pass"},
    {"name": "old model", "input": subject(model="gpt-3.5-turbo"), "expect": "fail"},
]


@pytest.fixture
def receiver() -> Iterator[WebhookTarget]:
    target = WebhookTarget()
    yield target
    target.close()


def save_policy(http: httpx.Client, org: Org, **fields: Any) -> httpx.Response:
    body = {
        "orgSlug": org.slug,
        "name": f"policy-{uuid.uuid4().hex[:8]}",
        "ruleText": "Production agents must not use gpt-3.5.",
        "check": NO_GPT35,
        "message": '="model " + agent.model + " is retired"',
        "examples": EXAMPLES,
        **fields,
    }
    return http.post("governance/policies", json=body, headers=org.headers)


def deploy(http: httpx.Client, org: Org, environment_id: str, keys: list[str]) -> httpx.Response:
    body = {"orgSlug": org.slug, "environmentId": environment_id, "agentStableKeys": keys}
    return http.post("agents/deployments", json=body, headers=org.headers)


def preview_violations(
    http: httpx.Client, org: Org, environment_id: str, keys: list[str]
) -> list[dict[str, Any]]:
    body = {"orgSlug": org.slug, "environmentId": environment_id, "agentStableKeys": keys}
    answer = http.post("agents/deployments/preview", json=body, headers=org.headers)
    assert answer.status_code == 200, answer.text
    return answer.json()["violations"]


def test_a_check_that_does_not_compile_is_a_400_naming_its_position(http, org):
    answer = save_policy(http, org, check='agent.model == "x" &&', enforcement="audit", examples=[])
    assert answer.status_code == 400
    assert answer.json()["details"][0]["field"] == "check"
    assert "line 1, column" in answer.json()["message"]


def test_a_check_answering_other_than_a_boolean_is_a_400(http, org):
    answer = save_policy(http, org, check="agent.model", enforcement="audit")
    assert answer.status_code == 400
    assert answer.json()["details"][0]["field"] == "check"
    assert "not a boolean" in answer.json()["message"]


def test_deny_needs_a_check_whose_examples_pass(http, org):
    wrong = [{**EXAMPLES[0], "expect": "fail"}, EXAMPLES[1]]
    refused = save_policy(http, org, enforcement="deny", examples=wrong)
    assert refused.status_code == 400 and refused.json()["details"][0]["field"] == "enforcement"
    assert "current model" in refused.json()["message"]
    untested = save_policy(http, org, enforcement="deny", examples=[])
    assert untested.status_code == 400 and untested.json()["details"][0]["field"] == "enforcement"
    without_check = save_policy(http, org, enforcement="deny", check=None, examples=[])
    assert without_check.status_code == 400
    saved = save_policy(http, org, enforcement="audit", examples=wrong)
    assert saved.status_code == 200, saved.text
    promoted = http.patch(
        f"governance/policies/{saved.json()['id']}",
        json={"orgSlug": org.slug, "enforcement": "deny"},
        headers=org.headers,
    )
    assert promoted.status_code == 400 and promoted.json()["details"][0]["field"] == "enforcement"


def test_examples_run_on_save_and_on_test(http, org):
    saved = save_policy(http, org)
    assert saved.status_code == 200, saved.text
    policy = saved.json()
    assert policy["enforcement"] == "deny"  # severity error's default
    assert [(r["name"], r["outcome"], r["passed"]) for r in policy["exampleResults"]] == [
        ("current model", "pass", True),
        ("old model", "fail", True),
    ]
    assert policy["exampleResults"][1]["message"] == "model gpt-3.5-turbo is retired"
    tested = http.post(
        f"governance/policies/{policy['id']}/test", params={"orgSlug": org.slug}, headers=org.headers
    )
    assert tested.status_code == 200 and tested.json()["passed"] is True
    unsaved = http.post(
        "governance/policies/test",
        json={"orgSlug": org.slug, "check": COOL, "examples": [{**EXAMPLES[0], "expect": "fail"}]},
        headers=org.headers,
    )
    assert unsaved.status_code == 200, unsaved.text
    assert unsaved.json()["passed"] is False and unsaved.json()["examples"][0]["outcome"] == "pass"


def test_each_enforcement_on_deploy_and_fleet_deploy(http, org, client: OrgdeckClient, db):
    environment = client.environments.create("production").id
    versioned_agent(client, "old", model="gpt-3.5-turbo")
    versioned_agent(client, "new")
    policy = save_policy(http, org, enforcement="audit").json()

    audited = preview_violations(http, org, environment, ["old", "new"])
    assert [(v["agent"], v["enforcement"], v["outcome"]) for v in audited] == [("old", "audit", "fail")]
    audited_job = deploy(http, org, environment, ["old"])
    assert audited_job.status_code == 200
    wait_for_end(client, audited_job.json()["id"])

    patch = {"orgSlug": org.slug, "enforcement": "warn"}
    assert (
        http.patch(f"governance/policies/{policy['id']}", json=patch, headers=org.headers).status_code == 200
    )
    assert preview_violations(http, org, environment, ["old"])[0]["enforcement"] == "warn"
    warned = deploy(http, org, environment, ["old"])
    assert warned.status_code == 200
    assert [(v["agent"], v["enforcement"]) for v in warned.json()["violations"]] == [("old", "warn")]
    listed = client.deployments.jobs(environment_id=environment).items
    assert [v.enforcement for v in listed[0].violations] == ["warn"]
    with db.session() as session:
        query = select(EventRow).where(EventRow.type == "policy.violation").order_by(EventRow.occurred_at)
        events = session.scalars(query).all()
        payloads = [e.payload for e in events if e.payload["violations"][0]["policyId"] == policy["id"]]
    # Moved to warn, the policy announces what already runs; then the deployment its own outcome.
    assert [(p.get("cause"), p["action"], p["violations"][0]["enforcement"]) for p in payloads] == [
        ("policySaved", "running", "warn"),
        (None, "deploy", "warn"),
    ]

    patch["enforcement"] = "deny"
    assert (
        http.patch(f"governance/policies/{policy['id']}", json=patch, headers=org.headers).status_code == 200
    )
    refused = deploy(http, org, environment, ["old", "new"])
    assert refused.status_code == 403
    assert refused.json()["code"] == "policy_violation"
    assert refused.json()["details"] == [
        {
            "policyId": policy["id"],
            "policyName": policy["name"],
            "agent": "old",
            "message": "model gpt-3.5-turbo is retired",
        }
    ]
    assert deploy(http, org, environment, ["new"]).status_code == 200

    fleet = client.fleets.create("legacy")
    client.agents.update("old", fleet_id=fleet.id)
    client.agents.snapshot("old")
    body = {"orgSlug": org.slug, "environmentId": environment}
    fleet_deploy = http.post(f"fleets/{fleet.id}/deploy", json=body, headers=org.headers)
    assert fleet_deploy.status_code == 403 and fleet_deploy.json()["code"] == "policy_violation"


def test_a_check_that_errors_is_reported_and_never_passes_a_deny(http, org, client):
    environment = client.environments.create("production").id
    client.agents.create("bare", "openai", provider_config={"model": "gpt-4o-mini"})
    client.agents.snapshot("bare")
    examples = [
        {"name": "cool", "input": subject(temperature=0.1), "expect": "pass"},
        {"name": "hot", "input": subject(temperature=0.9), "expect": "fail"},
    ]
    assert save_policy(http, org, check=COOL, message="too hot", examples=examples).status_code == 200
    violations = preview_violations(http, org, environment, ["bare"])
    assert violations[0]["outcome"] == "error" and "evaluation error" in violations[0]["message"]
    refused = deploy(http, org, environment, ["bare"])
    assert refused.status_code == 403
    assert "evaluation error" in refused.json()["details"][0]["message"]


@pytest.mark.parametrize("scope_kind", ["names", "protected", "tags", "fleets"])
def test_scope_by_environment_tag_and_fleet(http, org, client, scope_kind):
    inside = client.environments.create("production")
    outside = client.environments.create("staging")
    fleet = client.fleets.create("payments")
    client.agents.create(
        "in", "openai", tags=["pci"], fleet_id=fleet.id, provider_config={"model": "gpt-3.5-turbo"}
    )
    client.agents.create("out", "openai", provider_config={"model": "gpt-3.5-turbo"})
    for key in ("in", "out"):
        client.agents.snapshot(key)
    if scope_kind == "protected":
        client.environments.update(inside.id, protected=True)
    scope = {
        "names": {"environments": {"match": "names", "names": ["production"]}},
        "protected": {"environments": {"match": "protected"}},
        "tags": {"agents": {"match": "tags", "tags": ["pci"]}},
        "fleets": {"agents": {"match": "fleets", "fleetIds": [fleet.id]}},
    }[scope_kind]
    assert save_policy(http, org, enforcement="warn", scope=scope).status_code == 200
    flagged_inside = preview_violations(http, org, inside.id, ["in", "out"])
    flagged_outside = preview_violations(http, org, outside.id, ["in", "out"])
    if scope_kind in ("names", "protected"):
        assert {v["agent"] for v in flagged_inside} == {"in", "out"} and flagged_outside == []
    else:
        assert [v["agent"] for v in flagged_inside] == ["in"] == [v["agent"] for v in flagged_outside]


def test_an_exception_lets_a_deny_through_until_revoked(http, org, client, db):
    environment = client.environments.create("production").id
    versioned_agent(client, "old", model="gpt-3.5-turbo")
    policy = save_policy(http, org).json()
    assert deploy(http, org, environment, ["old"]).status_code == 403
    # The denial is on record although nothing was deployed: an audit event and an event.
    (denied,) = [e for e in client.audit.list(limit=100).items if e.action == "policyDenied"]
    assert (denied.target.type, denied.target.id) == ("policy", policy["id"])
    assert denied.changes["agentStableKeys"] == ["old"]
    with db.session() as session:
        events = session.scalars(select(EventRow).where(EventRow.type == "policy.violation")).all()
        refusals = [e.payload for e in events if e.payload["violations"][0]["policyId"] == policy["id"]]
    assert [(p["refused"], p["violations"][0]["agent"]) for p in refusals] == [(True, "old")]
    assert client.deployments.jobs(environment_id=environment).items == []
    expires = datetime.now(UTC) + timedelta(days=7)
    body = {
        "orgSlug": org.slug,
        "policyId": policy["id"],
        "agentStableKey": "old",
        "reason": "migration to gpt-4o next sprint",
        "expiresAt": expires.isoformat(),
    }
    too_long = {**body, "expiresAt": (expires + timedelta(days=100)).isoformat()}
    answer = http.post("governance/exceptions", json=too_long, headers=org.headers)
    assert answer.status_code == 400 and answer.json()["details"][0]["field"] == "expiresAt"
    exception = http.post("governance/exceptions", json=body, headers=org.headers).json()
    assert exception["live"] is True and exception["id"].startswith("pex")
    assert preview_violations(http, org, environment, ["old"])[0]["exceptionId"] == exception["id"]
    assert deploy(http, org, environment, ["old"]).status_code == 200
    revoked = http.delete(
        f"governance/exceptions/{exception['id']}", params={"orgSlug": org.slug}, headers=org.headers
    )
    assert revoked.status_code == 200 and revoked.json()["live"] is False
    assert deploy(http, org, environment, ["old"]).status_code == 403


def compliance(http: httpx.Client, org: Org) -> dict[str, Any]:
    answer = http.get("governance/compliance", params={"orgSlug": org.slug}, headers=org.headers)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_compliance_follows_deployments_and_policy_changes(http, org, client):
    environment = client.environments.create("production").id
    versioned_agent(client, "old", model="gpt-3.5-turbo")
    versioned_agent(client, "new")
    job = wait_for_end(client, client.deployments.deploy(environment, ["old", "new"]).id)
    assert job.status == "complete"
    assert compliance(http, org)["matrix"] == []

    policy = save_policy(http, org, enforcement="warn").json()
    assert [(v["agent"], v["environmentName"]) for v in policy["impact"]] == [("old", "production")]
    report = compliance(http, org)
    assert [(c["environmentName"], c["violations"], c["compliant"]) for c in report["matrix"]] == [
        ("production", 1, 1)
    ]
    assert [(v["agent"], v["enforcement"]) for v in report["violations"]] == [("old", "warn")]

    patch = {"orgSlug": org.slug, "check": 'agent.model != "gpt-4o-mini"', "examples": []}
    assert (
        http.patch(f"governance/policies/{policy['id']}", json=patch, headers=org.headers).status_code == 200
    )
    assert [v["agent"] for v in compliance(http, org)["violations"]] == ["new"]


def test_the_payload_carries_the_policies_and_a_text_change_drifts(http, org, client, receiver):
    environment = webhook_environment(client, receiver)
    versioned_agent(client, "bot")
    policy = save_policy(http, org, enforcement="warn").json()
    assert wait_for_end(client, client.deployments.deploy(environment, ["bot"]).id).status == "complete"
    (sent,) = receiver.manifests[0]["agents"]
    assert sent["config"]["policies"] == [
        {"id": policy["id"], "name": policy["name"], "version": 1, "ruleText": policy["ruleText"]}
    ]
    assert len(sent["config"]["policyBundleHash"]) == 64
    assert client.deployments.status(agent="bot", environment_id=environment).items[0].state == "in_sync"

    patch = {"orgSlug": org.slug, "ruleText": "Production agents must not use gpt-3.5 or gpt-4."}
    assert (
        http.patch(f"governance/policies/{policy['id']}", json=patch, headers=org.headers).status_code == 200
    )
    (status,) = client.deployments.status(agent="bot", environment_id=environment).items
    assert status.state == "drifted"
    assert [change.field for change in status.drift] == ["policyBundleHash"]
    preview = client.deployments.preview(environment, ["bot"])
    assert [change.field for change in preview.agents[0].changes] == ["policyBundleHash"]


@pytest.fixture
def team(server, client, org) -> Iterator[Team]:
    with ExitStack() as stack:
        yield Team(client, server.url, org, stack)


def test_a_change_request_cannot_be_approved_into_a_deny_violation(http, org, client, team):
    versioned_agent(client, "old", model="gpt-3.5-turbo")
    production = client.environments.create("production").id
    client.environments.update(production, protected=True)
    policy = save_policy(http, org, scope={"environments": {"match": "protected"}}).json()
    ana, bo = team.member("ana", "operator"), team.member("bo", "operator")

    opened = ana.change_requests.open(
        "deployment", {"environmentId": production, "agentStableKeys": ["old"]}, "Release"
    )
    (violation,) = opened.preview["violations"]
    assert (violation["policyId"], violation["enforcement"], violation["agent"]) == (
        policy["id"],
        "deny",
        "old",
    )
    with pytest.raises(Forbidden) as refused:
        bo.change_requests.approve(opened.id)
    assert refused.value.code == "policy_violation"
    assert ana.change_requests.get(opened.id).status == "open"
    assert client.deployments.jobs(environment_id=production).items == []

    expires = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    body = {
        "orgSlug": org.slug,
        "policyId": policy["id"],
        "environmentName": "production",
        "reason": "Last release on the old model",
        "expiresAt": expires,
    }
    assert http.post("governance/exceptions", json=body, headers=org.headers).status_code == 200
    applied = bo.change_requests.approve(opened.id)
    assert applied.status == "applied"
    job = client.deployments.job(applied.result["jobId"])
    assert [v.exception_id is not None for v in job.violations] == [True]


def test_an_exception_is_a_reviewed_change_where_policies_need_approval(http, org, client, team):
    environment = client.environments.create("production").id
    versioned_agent(client, "old", model="gpt-3.5-turbo")
    policy = save_policy(http, org).json()
    client.settings.update(policy_approval_required=True)
    ops, author = team.member("ops", "operator"), team.member("ana", "author")
    asked = {
        "policyId": policy["id"],
        "agentStableKey": "old",
        "reason": "One more release",
        "expiresAt": (datetime.now(UTC) + timedelta(days=2)).isoformat(),
    }
    direct = http.post("governance/exceptions", json={"orgSlug": org.slug, **asked}, headers=org.headers)
    assert direct.status_code == 403 and direct.json()["code"] == "approval_required"

    opened = ops.change_requests.open("policy", {**asked, "exception": True}, "Release train")
    assert opened.preview["action"] == "exception" and "agent old" in opened.target
    assert deploy(http, org, environment, ["old"]).status_code == 403
    applied = author.change_requests.approve(opened.id)
    assert applied.status == "applied"
    listed = http.get("governance/exceptions", params={"orgSlug": org.slug}, headers=org.headers).json()
    assert [(e["id"], e["createdBy"]) for e in listed["items"]] == [
        (applied.result["exceptionId"], "ops@example.com")
    ]
    assert deploy(http, org, environment, ["old"]).status_code == 200


def test_compliance_counts_a_violation_again_once_its_exception_expires(http, org, client, db):
    environment = client.environments.create("production").id
    versioned_agent(client, "old", model="gpt-3.5-turbo")
    assert wait_for_end(client, client.deployments.deploy(environment, ["old"]).id).status == "complete"
    policy = save_policy(http, org).json()
    body = {
        "orgSlug": org.slug,
        "policyId": policy["id"],
        "environmentName": "production",
        "reason": "Retiring next week",
        "expiresAt": (datetime.now(UTC) + timedelta(days=7)).isoformat(),
    }
    exception = http.post("governance/exceptions", json=body, headers=org.headers).json()
    assert compliance(http, org)["matrix"][0]["violations"] == 0
    with db.session(write=True) as session:
        row = session.get(PolicyExceptionRow, exception["id"])
        row.expires_at = datetime.now(UTC) - timedelta(minutes=1)
    report = compliance(http, org)
    assert report["matrix"][0]["violations"] == 1
    assert [(v["agent"], v["enforcement"]) for v in report["violations"]] == [("old", "deny")]


def test_the_service_runs_checks_without_loading_cels_command_line():
    # A fresh interpreter, as a start of the service: checks run, and the CLI's stack stayed out.
    program = (
        "import sys\n"
        "import service.app\n"
        "from service.governance.checks import compile_check, prepared_input, run_check\n"
        "check = compile_check('agent.model != \"gpt-3.5-turbo\"')\n"
        "print(run_check(check, prepared_input({'agent': {'model': 'gpt-4o'}})).outcome)\n"
        "print(sorted({'typer', 'prompt_toolkit'} & set(sys.modules)))\n"
    )
    assert fresh_python_prints(program) == ["pass", "[]"]

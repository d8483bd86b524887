"""Reviewed changes: protection rules, change requests of each kind from request to applied result,
the rules of review, conflicts, expiry, concurrent approvals and their notifications."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import timedelta

import httpx
import pytest
from sqlalchemy import delete, select, update

from api import OrgdeckClient
from api.approvals import ChangeRequestRef
from api.errors import BadRequest, Forbidden
from service.changes.models import ChangeRequestRow
from service.events.models import EventRow
from service.storage.db import Database, utcnow
from tests.conftest import Org, wait_for
from tests.deliveries.support import receiver  # noqa: F401 (a fixture)
from tests.test_deployments import versioned_agent, wait_for_end


class Team:
    """Members of the organization, each with a personal key and a client acting as them."""

    def __init__(self, admin: OrgdeckClient, server_url: str, org: Org, stack: ExitStack) -> None:
        self.admin, self.url, self.org, self.stack = admin, server_url, org, stack
        self.keys: dict[str, str] = {}
        self.member_ids: dict[str, str] = {}

    def member(self, name: str, role: str) -> OrgdeckClient:
        member = self.admin.members.create(f"{name}@example.com", name.title(), role)
        self.member_ids[name] = member.id
        self.keys[name] = self.admin.api_keys.create(f"{name}-key", member_id=member.id).key
        return self.stack.enter_context(OrgdeckClient(self.url, self.keys[name], org_slug=self.org.slug))


@pytest.fixture
def team(server, client, org) -> Iterator[Team]:
    with ExitStack() as stack:
        yield Team(client, server.url, org, stack)


@pytest.fixture
def production(client) -> str:
    """A protected environment `production` where `triage` (version 1) can be deployed."""
    versioned_agent(client, "triage")
    environment = client.environments.create("production")
    client.environments.update(environment.id, protected=True)
    return environment.id


def jobs_of(client: OrgdeckClient, environment_id: str) -> list[str]:
    return [job.id for job in client.deployments.jobs(environment_id=environment_id).items]


# -- deployments ----------------------------------------------------------------------------


def test_a_protected_environment_deploys_only_what_another_member_approved(client, team, production):
    ana, bo = team.member("ana", "operator"), team.member("bo", "operator")
    with pytest.raises(Forbidden) as direct:
        ana.deployments.deploy(production, ["triage"])
    assert direct.value.code == "approval_required"
    assert "production" in direct.value.message and "POST /change-requests" in direct.value.message
    fleet = client.fleets.create("all", environment_ids=[production])
    client.agents.update("triage", fleet_id=fleet.id)
    with pytest.raises(Forbidden):
        client.deployments.deploy_fleet(fleet.id, production)
    assert jobs_of(client, production) == []

    opened = ana.change_requests.open(
        "deployment", {"environmentId": production, "agentStableKeys": ["triage"]}, "First release"
    )
    assert opened.status == "open" and opened.required_approvals == 1 and opened.approvals == []
    assert opened.requested_by.email == "ana@example.com"
    assert opened.payload["agentVersions"] == {"triage": 1}
    assert opened.preview["agents"][0]["status"] == "added"
    assert opened.preview["before"] == {"triage": None}
    assert opened.target == "environment production"
    # A newer version after opening is not what was reviewed: the pinned one is deployed.
    client.agents.update("triage", name="Triage two")
    client.agents.snapshot("triage")

    with pytest.raises(Forbidden) as own:
        ana.change_requests.approve(opened.id)
    assert own.value.code == "self_review"
    applied = bo.change_requests.approve(opened.id, comment="Looks right")
    assert applied.status == "applied" and applied.decided_at is not None
    assert [(a.email, a.comment) for a in applied.approvals] == [("bo@example.com", "Looks right")]
    job = wait_for_end(client, applied.result["jobId"])
    assert job.status == "complete" and [a.version for a in job.agents] == [1]
    assert jobs_of(client, production) == [job.id]

    trail = [(e.action, e.actor.member_email) for e in client.audit.list(limit=100).items]
    assert ("openChangeRequest", "ana@example.com") in trail
    assert ("approveChangeRequest", "bo@example.com") in trail


def test_review_needs_the_changes_role_a_member_and_one_review_each(client, team, production):
    ana = team.member("ana", "operator")
    author, viewer = team.member("dee", "author"), team.member("vic", "viewer")
    payload = {"environmentId": production, "agentStableKeys": ["triage"]}
    with pytest.raises(Forbidden) as low:
        author.change_requests.open("deployment", payload, "I write prompts")
    assert low.value.code == "insufficient_role" and "needs the operator role" in low.value.message
    with pytest.raises(Forbidden):
        viewer.change_requests.open("deployment", payload, "I only read")
    opened = ana.change_requests.open("deployment", payload, "Release")
    with pytest.raises(Forbidden) as author_review:
        author.change_requests.approve(opened.id)
    assert "needs the operator role" in author_review.value.message
    with pytest.raises(Forbidden) as service_key:
        client.change_requests.approve(opened.id)
    assert service_key.value.code == "member_required" and "service key" in service_key.value.message
    with pytest.raises(Forbidden) as not_theirs:
        team.member("bo", "operator").change_requests.cancel(opened.id)
    assert not_theirs.value.code == "not_requester"
    assert ana.change_requests.cancel(opened.id).status == "cancelled"
    with pytest.raises(BadRequest) as closed:
        team.member("cy", "admin").change_requests.approve(opened.id)
    assert closed.value.code == "not_open"
    assert jobs_of(client, production) == []


def test_two_required_approvals_apply_on_the_second(client, team, production):
    client.environments.update(production, required_approvals=2)
    ana, bo, cy = (team.member(name, "operator") for name in ("ana", "bo", "cy"))
    opened = ana.change_requests.open(
        "deployment", {"environmentId": production, "agentStableKeys": ["triage"]}, "Release"
    )
    assert opened.required_approvals == 2
    first = bo.change_requests.approve(opened.id)
    assert first.status == "open" and len(first.approvals) == 1 and jobs_of(client, production) == []
    with pytest.raises(BadRequest) as twice:
        bo.change_requests.approve(opened.id)
    assert twice.value.code == "already_reviewed"
    second = cy.change_requests.approve(opened.id)
    assert second.status == "applied" and {a.email for a in second.approvals} == {
        "bo@example.com",
        "cy@example.com",
    }
    assert jobs_of(client, production) == [second.result["jobId"]]


def test_a_deployment_whose_environment_moved_ends_in_conflict(client, team, production):
    ana, bo = team.member("ana", "operator"), team.member("bo", "operator")
    payload = {"environmentId": production, "agentStableKeys": ["triage"]}
    first = ana.change_requests.open("deployment", payload, "Release one")
    second = ana.change_requests.open("deployment", payload, "The same, again")
    wait_for_end(client, bo.change_requests.approve(first.id).result["jobId"])
    conflicted = bo.change_requests.approve(second.id)
    assert conflicted.status == "conflict" and conflicted.result is None
    assert "changed since the request was opened" in conflicted.conflict
    assert len(jobs_of(client, production)) == 1


def test_a_rejected_request_changes_nothing(client, team, production):
    ana, bo = team.member("ana", "operator"), team.member("bo", "operator")
    opened = ana.change_requests.open(
        "deployment", {"environmentId": production, "agentStableKeys": ["triage"]}, "Release"
    )
    rejected = bo.change_requests.reject(opened.id, comment="Not on a Friday")
    assert rejected.status == "rejected" and rejected.rejection.comment == "Not on a Friday"
    assert jobs_of(client, production) == []


# -- counted when a review decides ----------------------------------------------------------


def test_raising_required_approvals_after_opening_needs_the_new_count(client, team, production):
    ana, bo, cy, dee = (team.member(name, "operator") for name in ("ana", "bo", "cy", "dee"))
    opened = ana.change_requests.open(
        "deployment", {"environmentId": production, "agentStableKeys": ["triage"]}, "Release"
    )
    assert opened.required_approvals == 1
    client.environments.update(production, required_approvals=3)
    assert client.change_requests.get(opened.id).required_approvals == 3
    first = bo.change_requests.approve(opened.id)
    assert first.status == "open" and first.required_approvals == 3 and jobs_of(client, production) == []
    assert cy.change_requests.approve(opened.id).status == "open"
    applied = dee.change_requests.approve(opened.id)
    assert applied.status == "applied" and applied.required_approvals == 3
    assert jobs_of(client, production) == [applied.result["jobId"]]


def test_lowered_rules_still_need_one_approval_and_apply_only_on_a_review(client, team, production):
    client.environments.update(production, required_approvals=2)
    ana, bo, cy = (team.member(name, "operator") for name in ("ana", "bo", "cy"))
    opened = ana.change_requests.open(
        "deployment", {"environmentId": production, "agentStableKeys": ["triage"]}, "Release"
    )
    assert bo.change_requests.approve(opened.id).status == "open"
    client.environments.update(production, protected=False)
    waiting = client.change_requests.get(opened.id)
    assert waiting.status == "open" and waiting.required_approvals == 1
    assert jobs_of(client, production) == []
    applied = cy.change_requests.approve(opened.id)
    assert applied.status == "applied" and applied.required_approvals == 1


@pytest.mark.parametrize(
    ("demotion", "because"),
    [("deactivated", "bo@example.com has been deactivated"), ("lowered", "bo@example.com is now author")],
)
def test_an_approval_counts_only_while_its_member_is_active_and_holds_the_role(
    client, team, production, demotion, because
):
    client.environments.update(production, required_approvals=2)
    ana, bo, cy, dee = (team.member(name, "operator") for name in ("ana", "bo", "cy", "dee"))
    opened = ana.change_requests.open(
        "deployment", {"environmentId": production, "agentStableKeys": ["triage"]}, "Release"
    )
    assert bo.change_requests.approve(opened.id).status == "open"
    if demotion == "deactivated":
        client.members.deactivate(team.member_ids["bo"])
    else:
        client.members.update(team.member_ids["bo"], role="author")
    second = cy.change_requests.approve(opened.id)
    assert second.status == "open" and jobs_of(client, production) == []
    assert [(a.email, a.counted) for a in second.approvals] == [
        ("bo@example.com", False),
        ("cy@example.com", True),
    ]
    assert because in second.approvals[0].not_counted_because
    applied = dee.change_requests.approve(opened.id)
    assert applied.status == "applied"
    assert [a.counted for a in applied.approvals] == [False, True, True]
    job = client.deployments.job(applied.result["jobId"])
    assert [a.email for a in job.change_request.approved_by] == ["cy@example.com", "dee@example.com"]


# -- labels and policies --------------------------------------------------------------------


def test_a_protected_label_moves_only_by_an_approved_request(client, team, org):
    ref = f"{org.slug}/prompts"
    client.registries.create("prompts")
    client.registries.publish(ref, "greeting", "Hello {{name}}", labels=["production"])
    client.registries.publish(ref, "greeting", "Hi {{name}}")
    registry = client.registries.update(ref, protected_labels=["production"])
    assert registry.protected_labels == ["production"]
    assert client.registries.list().items[0].protected_labels == ["production"]
    dee, eve = team.member("dee", "author"), team.member("eve", "author")
    for attempt in (
        lambda: dee.registries.move_label(ref, "greeting", "production", "2"),
        lambda: dee.registries.publish(ref, "greeting", "Hey {{name}}", labels=["production"]),
    ):
        with pytest.raises(Forbidden) as direct:
            attempt()
        assert direct.value.code == "approval_required" and "production" in direct.value.message
    assert client.registries.retrieve(ref, "greeting", label="production").version == "1"

    move = {"registryRef": ref, "name": "greeting", "label": "production", "version": "2"}
    opened = dee.change_requests.open("label", move, "Friendlier greeting")
    assert opened.preview["before"]["version"] == "1" and opened.preview["after"]["version"] == "2"
    assert "-Hello {{name}}" in opened.preview["diff"] and "+Hi {{name}}" in opened.preview["diff"]
    stale = dee.change_requests.open("label", move | {"version": "1"}, "Keep it as it is")
    applied = eve.change_requests.approve(opened.id)
    assert applied.status == "applied" and applied.result == {**move, "registryRef": ref}
    assert client.registries.retrieve(ref, "greeting", label="production").version == "2"
    assert eve.change_requests.approve(stale.id).status == "conflict"
    assert client.registries.retrieve(ref, "greeting", label="production").version == "2"
    with pytest.raises(BadRequest) as deleting:
        client.registries.delete(ref)
    assert deleting.value.code == "protected"


def test_policies_need_approval_when_the_organization_says_so(client, team):
    dee, eve = team.member("dee", "author"), team.member("eve", "author")
    with pytest.raises(Forbidden) as not_admin:
        team.member("ops", "operator").settings.update(policy_approval_required=True)
    assert not_admin.value.code == "insufficient_role"
    settings = client.settings.update(policy_approval_required=True)
    assert settings.policy_approval_required and settings.change_request_ttl_days == 7
    with pytest.raises(Forbidden) as direct:
        dee.policies.create("no-secrets", "Never log secrets.")
    assert direct.value.code == "approval_required"
    assert dee.policies.list().items == []

    created = eve.change_requests.approve(
        dee.change_requests.open(
            "policy", {"name": "no-secrets", "ruleText": "Never log secrets."}, "Baseline"
        ).id
    )
    assert created.status == "applied" and created.result["version"] == 1
    policy_id = created.result["policyId"]
    with pytest.raises(Forbidden):
        dee.policies.update(policy_id, rule_text="Anything goes.")
    change = dee.change_requests.open(
        "policy", {"policyId": policy_id, "ruleText": "Never log secrets, nor tokens."}, "Tokens too"
    )
    assert (
        change.preview["before"]["version"] == 1
        and "+Never log secrets, nor tokens." in change.preview["diff"]
    )
    updated = eve.change_requests.approve(change.id)
    assert updated.result == {"policyId": policy_id, "version": 2}
    assert "nor tokens" in client.policies.get(policy_id).rule_text
    removal = dee.change_requests.open("policy", {"policyId": policy_id, "delete": True}, "Superseded")
    assert eve.change_requests.approve(removal.id).result == {"policyId": policy_id, "deleted": True}
    assert client.policies.list().items == []


def test_a_policy_changes_preview_shows_the_scope_and_examples_it_changes(client, team):
    """A reviewer sees every versioned field a request changes, not only its text: a narrowed scope
    or a replaced example is shown before and after."""
    dee = team.member("dee", "author")
    policy = client.policies.create("no-gpt-3.5", "Production agents do not use gpt-3.5.")
    client.settings.update(policy_approval_required=True)
    scope = {"environments": {"match": "names", "names": ["production"]}, "agents": {"match": "all"}}
    example = {"name": "gpt-4o passes", "input": {"agent": {"model": "gpt-4o"}}, "expect": "pass"}
    change = dee.change_requests.open(
        "policy", {"policyId": policy.id, "scope": scope, "examples": [example]}, "Production only"
    )
    before, after = change.preview["before"], change.preview["after"]
    assert before["scope"]["environments"]["match"] == "all" and before["examples"] == []
    assert after["scope"]["environments"] == {"match": "names", "names": ["production"]}
    assert after["examples"] == [example]
    assert after["ruleText"] == before["ruleText"] == "Production agents do not use gpt-3.5."


def test_protection_rules_are_the_admins_and_shown_in_listings(client, team, http, org):
    environment = client.environments.create("production")
    ops = team.member("ops", "operator")
    with pytest.raises(Forbidden) as refused:
        ops.environments.update(environment.id, protected=True)
    assert refused.value.code == "insufficient_role" and "needs the admin role" in refused.value.message
    assert ops.environments.update(environment.id, description="Live").description == "Live"
    client.environments.update(environment.id, protected=True, required_approvals=3)
    listed = client.environments.list().items[0]
    assert listed.protected and listed.required_approvals == 3
    for value in (0, 6, "2"):
        response = http.patch(
            f"environments/{environment.id}",
            json={"orgSlug": org.slug, "requiredApprovals": value},
            headers=org.headers,
        )
        assert response.status_code == 400 and response.json()["details"][0]["field"] == "requiredApprovals"
    client.registries.create("prompts")
    response = http.patch(
        "registries",
        json={"registryRef": f"{org.slug}/prompts", "protectedLabels": ["latest"]},
        headers=org.headers,
    )
    assert response.status_code == 400 and response.json()["details"][0]["field"] == "protectedLabels"


def test_a_bad_payload_is_400_naming_its_field(client, http, org, production):
    body = {
        "orgSlug": org.slug,
        "kind": "deployment",
        "payload": {"agentStableKeys": ["triage"]},
        "reason": "x",
    }
    response = http.post("change-requests", json=body, headers=org.headers)
    assert response.status_code == 400 and response.json()["details"][0]["field"] == "payload.environmentId"
    body["payload"] = {"environmentId": production, "agentStableKeys": ["nobody"]}
    response = http.post("change-requests", json=body, headers=org.headers)
    assert response.status_code == 400 and response.json()["details"][0]["field"] == "agentStableKeys"
    body["payload"] = {"orgSlug": "someone-else", "environmentId": production, "agentStableKeys": ["triage"]}
    response = http.post("change-requests", json=body, headers=org.headers)
    assert response.status_code == 400 and response.json()["details"][0]["field"] == "payload.orgSlug"
    assert client.change_requests.list().items == []


# -- expiry, listing, concurrency, notifications --------------------------------------------


def test_an_open_request_expires_after_the_organizations_ttl(client, team, production, db: Database):
    ana, bo = team.member("ana", "operator"), team.member("bo", "operator")
    payload = {"environmentId": production, "agentStableKeys": ["triage"]}
    client.settings.update(change_request_ttl_days=30)
    old, fresh = (ana.change_requests.open("deployment", payload, reason) for reason in ("Old", "Fresh"))
    with db.session(write=True) as session:
        session.execute(
            update(ChangeRequestRow)
            .where(ChangeRequestRow.id == old.id)
            .values(created_at=utcnow() - timedelta(days=7, minutes=1))
        )
    assert client.change_requests.get(old.id).status == "open"
    assert client.settings.update(change_request_ttl_days=7).change_request_ttl_days == 7
    assert client.change_requests.get(old.id).status == "expired"
    assert [r.id for r in client.change_requests.list(status="open").items] == [fresh.id]
    assert [r.id for r in client.change_requests.list(status="expired").items] == [old.id]
    with pytest.raises(BadRequest) as late:
        bo.change_requests.approve(old.id)
    assert late.value.code == "not_open" and "expired" in late.value.message
    assert jobs_of(client, production) == []
    # The worker marks it in its row too, and announces it.
    wait_for(lambda: stored_status(db, old.id) == "expired", what="the worker's expiry")
    announced = wait_for(lambda: decided_events(db, old.id), what="the expiry's event")
    assert [event["status"] for event in announced] == ["expired"]
    assert stored_status(db, fresh.id) == "open"


def stored_status(db: Database, change_request_id: str) -> str:
    with db.session() as session:
        return session.get_one(ChangeRequestRow, change_request_id).status


def decided_events(db: Database, change_request_id: str) -> list[dict]:
    with db.session() as session:
        events = session.scalars(select(EventRow).where(EventRow.type == "change_request.decided"))
        return [event.payload for event in events if event.payload["changeRequestId"] == change_request_id]


def test_listing_pages_and_filters(client, team, production, org, http):
    ana = team.member("ana", "operator")
    payload = {"environmentId": production, "agentStableKeys": ["triage"]}
    opened = [ana.change_requests.open("deployment", payload, f"Release {i}").id for i in range(3)]
    ana.change_requests.cancel(opened[0])
    first = client.change_requests.list(limit=2)
    second = client.change_requests.list(limit=2, cursor=first.next_cursor)
    assert [r.id for r in first.items + second.items] == opened[::-1] and second.next_cursor is None
    assert [r.id for r in client.change_requests.list(status="cancelled", kind="deployment").items] == [
        opened[0]
    ]
    assert client.change_requests.list(kind="label").items == []
    response = http.get(
        "change-requests", params={"orgSlug": org.slug, "status": "done"}, headers=org.headers
    )
    assert response.status_code == 400 and response.json()["details"][0]["field"] == "status"


def test_concurrent_approvals_apply_exactly_once(client, team, production, server):
    ana = team.member("ana", "operator")
    approvers = [team.member(f"approver{i}", "operator") for i in range(4)]
    opened = ana.change_requests.open(
        "deployment", {"environmentId": production, "agentStableKeys": ["triage"]}, "Release"
    )
    start = threading.Barrier(len(approvers))
    answers: list[httpx.Response] = []

    def approve(name: str) -> None:
        start.wait()
        response = httpx.post(
            f"{server.url}/change-requests/{opened.id}/approve",
            json={"orgSlug": team.org.slug},
            headers={"X-API-Key": team.keys[name]},
            timeout=60,
        )
        answers.append(response)

    threads = [threading.Thread(target=approve, args=(f"approver{i}",)) for i in range(len(approvers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(r.status_code for r in answers) == [200, 400, 400, 400], [r.text for r in answers]
    assert {r.json()["code"] for r in answers if r.status_code == 400} == {"not_open"}
    final = client.change_requests.get(opened.id)
    assert final.status == "applied" and len(final.approvals) == 1
    assert jobs_of(client, production) == [final.result["jobId"]]


def approve_at_once(server, team: Team, approver: str, request_ids: list[str]) -> list[httpx.Response]:
    """One approval of each request, all sent at the same moment."""
    start = threading.Barrier(len(request_ids))
    answers: list[httpx.Response] = []

    def approve(request_id: str) -> None:
        start.wait()
        answers.append(
            httpx.post(
                f"{server.url}/change-requests/{request_id}/approve",
                json={"orgSlug": team.org.slug},
                headers={"X-API-Key": team.keys[approver]},
                timeout=60,
            )
        )

    threads = [threading.Thread(target=approve, args=(request_id,)) for request_id in request_ids]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [r.status_code for r in answers] == [200] * len(request_ids), [r.text for r in answers]
    return answers


def one_applied(client: OrgdeckClient, request_ids: list[str]) -> str:
    """The one request of these that applied; every other ended `conflict`, saying why."""
    decided = [client.change_requests.get(request_id) for request_id in request_ids]
    assert sorted(r.status for r in decided) == ["applied"] + ["conflict"] * (len(decided) - 1)
    assert all(r.conflict and r.result is None for r in decided if r.status == "conflict")
    return next(r.id for r in decided if r.status == "applied")


def test_of_label_moves_opened_from_one_state_exactly_one_applies(client, team, org, server):
    ref = f"{org.slug}/prompts"
    client.registries.create("prompts")
    client.registries.publish(ref, "greeting", "Hello 1", labels=["production"])
    for n in range(2, 10):
        client.registries.publish(ref, "greeting", f"Hello {n}")
    client.registries.update(ref, protected_labels=["production"])
    dee, _ = team.member("dee", "author"), team.member("eve", "author")
    opened = [
        dee.change_requests.open(
            "label",
            {"registryRef": ref, "name": "greeting", "label": "production", "version": str(n)},
            f"Greeting {n}",
        )
        for n in range(2, 10)
    ]
    approve_at_once(server, team, "eve", [r.id for r in opened])
    applied = one_applied(client, [r.id for r in opened])
    version = next(r.payload["version"] for r in opened if r.id == applied)
    assert client.registries.retrieve(ref, "greeting", label="production").version == version


def test_of_policy_changes_opened_from_one_version_exactly_one_applies(client, team, server):
    policy = client.policies.create("no-secrets", "Never log secrets.")
    client.settings.update(policy_approval_required=True)
    dee, _ = team.member("dee", "author"), team.member("eve", "author")
    opened = [
        dee.change_requests.open(
            "policy", {"policyId": policy.id, "ruleText": f"Never log secrets, rule {n}."}, f"Rule {n}"
        )
        for n in range(8)
    ]
    approve_at_once(server, team, "eve", [r.id for r in opened])
    applied = one_applied(client, [r.id for r in opened])
    now = client.policies.get(policy.id)
    assert now.version == 2 and [v.version for v in now.versions] == [2, 1]
    assert now.rule_text == next(r.payload["ruleText"] for r in opened if r.id == applied)


def test_of_deployments_opened_from_one_state_exactly_one_applies(client, team, production, server):
    ana, _ = team.member("ana", "operator"), team.member("bo", "operator")
    payload = {"environmentId": production, "agentStableKeys": ["triage"]}
    opened = [ana.change_requests.open("deployment", payload, f"Release {n}") for n in range(8)]
    approve_at_once(server, team, "bo", [r.id for r in opened])
    applied = one_applied(client, [r.id for r in opened])
    assert jobs_of(client, production) == [client.change_requests.get(applied).result["jobId"]]


def test_opened_and_decided_reach_a_subscribed_webhook(client, team, production, receiver):  # noqa: F811
    url = receiver.script("/changes", 200)
    channel = client.notifications.create_channel("reviews", "webhook", url=url)
    for event_type in ("change_request.opened", "change_request.decided"):
        client.notifications.subscribe(channel.id, event_type)
    ana, bo = team.member("ana", "operator"), team.member("bo", "operator")
    opened = ana.change_requests.open(
        "deployment", {"environmentId": production, "agentStableKeys": ["triage"]}, "Release"
    )
    bo.change_requests.reject(opened.id, comment="Later")
    received = wait_for(
        lambda: (
            (
                mine := [
                    r.json()
                    for r in receiver.at("/changes")
                    if r.json()["data"]["changeRequestId"] == opened.id
                ]
            )
            and len(mine) == 2
            and mine
        ),
        what="both change request notifications",
    )
    by_type = {message["type"]: message["data"] for message in received}
    assert by_type["change_request.opened"]["requestedBy"] == "ana@example.com"
    assert by_type["change_request.decided"]["status"] == "rejected"
    assert by_type["change_request.decided"]["reviewedBy"] == ["bo@example.com"]


# -- on record as the change itself ---------------------------------------------------------


def applied_events(client: OrgdeckClient, change_request_id: str) -> list:
    return [
        event
        for event in client.audit.list(limit=100).items
        if event.change_request is not None and event.change_request.id == change_request_id
    ]


def test_an_approved_deployment_is_on_record_as_the_requesters_deploy(client, team, production):
    ana, bo = team.member("ana", "operator"), team.member("bo", "operator")
    opened = ana.change_requests.open(
        "deployment", {"environmentId": production, "agentStableKeys": ["triage"]}, "Release"
    )
    applied = bo.change_requests.approve(opened.id, comment="Go")
    job_id = applied.result["jobId"]
    [event] = applied_events(client, opened.id)
    assert event.action == "deploy"
    assert (event.actor.key_id, event.actor.key_name) == (opened.requested_by.key_id, "ana-key")
    assert (event.actor.member_id, event.actor.member_email) == (team.member_ids["ana"], "ana@example.com")
    assert (event.target.type, event.target.id) == ("deployment_job", job_id)
    assert event.changes["agentVersions"] == {"triage": 1}
    assert [a.email for a in event.change_request.approved_by] == ["bo@example.com"]
    assert event.change_request.requested_by.email == "ana@example.com"
    approval = client.audit.list(action="approveChangeRequest").items[0]
    assert approval.actor.member_email == "bo@example.com" and approval.request_id == event.request_id

    named = {"id": opened.id, "email": "ana@example.com", "approvers": ["bo@example.com"]}
    for job in (client.deployments.job(job_id), client.deployments.jobs(environment_id=production).items[0]):
        reference = job.change_request
        assert {
            "id": reference.id,
            "email": reference.requested_by.email,
            "approvers": [a.email for a in reference.approved_by],
        } == named
    direct = client.deployments.deploy(client.environments.create("staging").id, ["triage"])
    assert direct.change_request is None
    assert client.deployments.jobs(limit=1).items[0].change_request is None


def test_an_approved_label_move_is_on_record_as_the_requesters_move(client, team, org):
    ref = f"{org.slug}/prompts"
    client.registries.create("prompts")
    client.registries.publish(ref, "greeting", "Hello", labels=["production"])
    client.registries.publish(ref, "greeting", "Hi", labels=["staging"])
    client.registries.update(ref, protected_labels=["production"])
    dee, eve = team.member("dee", "author"), team.member("eve", "author")
    move = {"registryRef": ref, "name": "greeting", "label": "production", "version": "2"}
    opened = dee.change_requests.open("label", move, "Friendlier")
    eve.change_requests.approve(opened.id)
    [event] = applied_events(client, opened.id)
    assert (event.action, event.actor.member_email) == ("moveLabel", "dee@example.com")
    assert (event.target.type, event.target.name) == ("artifact_version", "greeting")
    assert event.changes == {"label": "production", "name": "greeting", "registryRef": ref, "version": "2"}
    assert [a.email for a in event.change_request.approved_by] == ["eve@example.com"]

    [version] = [v for v in client.registries.versions(ref, "greeting").items if v.version == "2"]
    assert version.labels == ["latest", "production", "staging"]
    assert list(version.label_change_requests) == ["production"]
    moved_by = version.label_change_requests["production"]
    assert moved_by.id == opened.id and moved_by.requested_by.email == "dee@example.com"
    assert [a.email for a in moved_by.approved_by] == ["eve@example.com"]
    # Moved directly afterwards (unprotected), the label no longer names the request.
    client.registries.update(ref, protected_labels=[])
    moved = client.registries.move_label(ref, "greeting", "production", "1")
    assert moved.label_change_requests == {}


def test_approved_policy_changes_are_on_record_as_the_requesters_own(client, team):
    client.settings.update(policy_approval_required=True)
    dee, eve = team.member("dee", "author"), team.member("eve", "author")
    created = dee.change_requests.open("policy", {"name": "no-secrets", "ruleText": "Never."}, "Baseline")
    policy_id = eve.change_requests.approve(created.id).result["policyId"]
    updated = dee.change_requests.open("policy", {"policyId": policy_id, "ruleText": "Never, ever."}, "Ever")
    eve.change_requests.approve(updated.id)
    versions = client.policies.get(policy_id).versions
    assert [(v.version, v.change_request.id) for v in versions] == [(2, updated.id), (1, created.id)]
    assert [a.email for a in versions[0].change_request.approved_by] == ["eve@example.com"]
    removal = dee.change_requests.open("policy", {"policyId": policy_id, "delete": True}, "Superseded")
    eve.change_requests.approve(removal.id)
    for request, action in ((created, "createPolicy"), (updated, "updatePolicy"), (removal, "deletePolicy")):
        [event] = applied_events(client, request.id)
        assert (event.action, event.actor.member_email) == (action, "dee@example.com")
        assert (event.target.type, event.target.id) == ("policy", policy_id)
        assert [a.email for a in event.change_request.approved_by] == ["eve@example.com"]


def test_what_a_request_made_keeps_naming_it_without_the_request(client, team, org, production, db):
    """The approvals that applied a request never change afterwards: the job, the label, the policy
    version and the audit events keep the reference they were made with, and answer it from there,
    even with the requests gone."""
    ana, bo = team.member("ana", "operator"), team.member("bo", "operator")
    ref = f"{org.slug}/prompts"
    client.registries.create("prompts")
    client.registries.publish(ref, "greeting", "Hello", labels=["production"])
    client.registries.publish(ref, "greeting", "Hi")
    client.registries.update(ref, protected_labels=["production"])
    client.settings.update(policy_approval_required=True)
    opened = [
        ana.change_requests.open(kind, payload, "Release")
        for kind, payload in (
            ("deployment", {"environmentId": production, "agentStableKeys": ["triage"]}),
            ("label", {"registryRef": ref, "name": "greeting", "label": "production", "version": "2"}),
            ("policy", {"name": "no-secrets", "ruleText": "Never."}),
        )
    ]
    deployed, _, created = (bo.change_requests.approve(request.id).result for request in opened)
    with db.session(write=True) as session:
        session.execute(delete(ChangeRequestRow))

    def named(reference: ChangeRequestRef | None) -> tuple[str, str | None, list[str]]:
        assert reference is not None
        return reference.id, reference.requested_by.email, [a.email for a in reference.approved_by]

    deployment, label, policy = [(request.id, "ana@example.com", ["bo@example.com"]) for request in opened]
    assert named(client.deployments.job(deployed["jobId"]).change_request) == deployment
    assert named(client.deployments.jobs(environment_id=production).items[0].change_request) == deployment
    [version] = [v for v in client.registries.versions(ref, "greeting").items if v.version == "2"]
    assert named(version.label_change_requests["production"]) == label
    assert named(client.policies.get(created["policyId"]).versions[0].change_request) == policy
    for request, made in zip(opened, (deployment, label, policy), strict=True):
        [event] = applied_events(client, request.id)
        assert named(event.change_request) == made


def test_awaiting_my_review_lists_what_the_caller_may_approve_now(client, team, production, org):
    ana = team.member("ana", "operator")
    ben = team.member("ben", "operator")
    cleo = team.member("cleo", "author")
    # Another key of ana's own: her requests are hers whichever key opened them.
    ana_laptop = team.admin.api_keys.create("ana-laptop", member_id=team.member_ids["ana"]).key
    payload = {"environmentId": production, "agentStableKeys": ["triage"]}
    first = ana.change_requests.open("deployment", payload, "Release 1").id
    second = ana.change_requests.open("deployment", payload, "Release 2").id
    cancelled = ana.change_requests.open("deployment", payload, "Release 3").id
    ana.change_requests.cancel(cancelled)

    def awaiting(member: OrgdeckClient) -> list[str]:
        return [r.id for r in member.change_requests.list(awaiting_my_review=True).items]

    assert awaiting(ben) == [second, first]
    assert awaiting(ana) == []
    with OrgdeckClient(team.url, ana_laptop, org_slug=org.slug) as ana_elsewhere:
        assert awaiting(ana_elsewhere) == []
    assert awaiting(cleo) == []  # a deployment needs an operator to review it
    assert awaiting(client) == []  # a service key belongs to no member
    team.admin.environments.update(production, required_approvals=2)
    ben.change_requests.approve(first)
    assert awaiting(ben) == [second]  # reviewed once: no longer his to review
    assert [r.id for r in ben.change_requests.list().items] == [cancelled, second, first]

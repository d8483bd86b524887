"""Protected environments: where their deployments go and what they carry (name, target, webhook URL,
secrets, signing key, tool deployment records, deletion) changes only through an `environment`
change request, whoever calls; each action applied as previewed by another operator, a secret's
value never shown, a conflict when what it replaces moved; unprotected environments as before."""

# ruff: noqa: F811 (the fixtures `team` and `target`, imported, are the tests' arguments)
from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from api import OrgdeckClient
from api.common import format_timestamp
from api.errors import BadRequest, Forbidden
from service.changes.models import ChangeRequestRow
from service.environments.service import decrypt_secret_values
from service.events.models import EventRow
from service.orgs.service import get_org
from service.storage.crypto import cipher_for
from service.storage.db import Database
from service.trail.models import AuditEventRow
from tests.conftest import Org, raw_database_contains
from tests.test_changes import team  # noqa: F401 (a fixture)
from tests.test_deployments import (  # noqa: F401 (target is a fixture)
    WebhookTarget,
    target,
    versioned_agent,
    wait_for_end,
    webhook_environment,
)

ATTACKER_URL = "https://collector.example.net/hooks/in?token=abc"


def tool_record(client: OrgdeckClient, environment: str, version: str) -> None:
    client.tool_deployments.record(
        tool_name="Search tickets",
        tool_key="zendesk.search",
        environment=environment,
        provider="zendesk",
        tool_id="search-1",
        version=version,
        hash=f"h{version}",
    )


def protected_webhook(client: OrgdeckClient, target: WebhookTarget) -> tuple[str, str]:
    """A protected webhook environment (its id and name), set up before it was protected: its
    signing key, its own secret ZENDESK_TOKEN, the org-wide OPENAI_API_KEY it carries, a tool
    record; `triage` deploys there with both secrets."""
    environment = webhook_environment(client, target)
    client.environments.secrets.set("ZENDESK_TOKEN", "zendesk-one", environment_id=environment)
    client.environments.secrets.set("OPENAI_API_KEY", "openai-one")
    name = client.environments.get(environment).name
    tool_record(client, name, "1")
    versioned_agent(client, "triage", apiKey="${secret:OPENAI_API_KEY}", ticketKey="${secret:ZENDESK_TOKEN}")
    client.environments.update(environment, protected=True)
    return environment, name


def state(client: OrgdeckClient) -> dict[str, Any]:
    """Everything a direct call could change: environments, secrets (versions), tool records."""
    return {
        "environments": [e.model_dump() for e in client.environments.list(limit=1000).items],
        "secrets": [s.model_dump() for s in client.environments.secrets.list(limit=1000).items],
        "tools": [r.model_dump() for r in client.tool_deployments.list(limit=1000).items],
    }


def secret_id(client: OrgdeckClient, name: str, environment_id: str | None) -> str:
    secrets = client.environments.secrets.list(limit=1000).items
    return next(s.id for s in secrets if s.name == name and s.environment_id == environment_id)


def direct_calls(
    caller: OrgdeckClient, client: OrgdeckClient, environment: str, name: str
) -> list[tuple[str, Callable[[], Any]]]:
    """Each direct call that changes where the environment's deployments go or what they carry,
    with the field its refusal names."""
    own, shared = secret_id(client, "ZENDESK_TOKEN", environment), secret_id(client, "OPENAI_API_KEY", None)
    secrets = caller.environments.secrets
    return [
        ("target", lambda: caller.environments.update(environment, target="builtin")),
        ("webhookUrl", lambda: caller.environments.update(environment, webhook_url=ATTACKER_URL)),
        ("name", lambda: caller.environments.update(environment, name="retired")),
        ("environmentId", lambda: caller.environments.delete(environment)),
        ("environmentId", lambda: secrets.set("ZENDESK_TOKEN", "x", environment_id=environment)),
        ("environmentId", lambda: secrets.set("NEW_TOKEN", "x", environment_id=environment)),
        ("secretId", lambda: secrets.delete(own)),
        # Org-wide: carried by the protected environment, which has no OPENAI_API_KEY of its own.
        ("name", lambda: secrets.set("OPENAI_API_KEY", "x")),
        ("secretId", lambda: secrets.delete(shared)),
        ("environmentId", lambda: caller.deployments.create_signing_key(environment)),
        ("environment", lambda: tool_record(caller, name, "2")),
    ]


@pytest.mark.parametrize("role", ["operator", "admin"])
def test_every_direct_change_to_a_protected_environment_is_refused_and_changes_nothing(
    client, team, target, role
):
    environment, name = protected_webhook(client, target)
    caller = team.member("cy", role)
    before = state(client)
    for field, call in direct_calls(caller, client, environment, name):
        with pytest.raises(Forbidden) as refused:
            call()
        assert refused.value.code == "approval_required", field
        assert "protected" in refused.value.message and "kind 'environment'" in refused.value.message
        assert '"action"' in refused.value.message
        assert [detail.field for detail in refused.value.details] == [field]
    assert state(client) == before
    # The description stays free; an org-wide secret the protected environment shadows is not carried.
    assert caller.environments.update(environment, description="Live").description == "Live"
    assert caller.environments.secrets.set("ZENDESK_TOKEN", "org-wide").environment_id is None


def test_unprotected_environments_change_directly_as_before(client, team, target):
    protected_webhook(client, target)
    ops = team.member("ops", "operator")
    sandbox = ops.environments.create("sandbox", target="webhook", webhook_url="https://one.example.com/x")
    moved = ops.environments.update(sandbox.id, webhook_url="https://two.example.com/y", name="playground")
    assert (moved.name, moved.webhook_url) == ("playground", "https://two.example.com/y")
    scoped = ops.environments.secrets.set("OPENAI_API_KEY", "sandbox-only", environment_id=sandbox.id)
    assert ops.deployments.create_signing_key(sandbox.id).secret.startswith("whsec_")
    tool_record(ops, "playground", "1")
    ops.environments.secrets.delete(scoped.id)
    assert ops.environments.update(sandbox.id, target="builtin").webhook_url is None
    assert ops.environments.delete(sandbox.id).id == sandbox.id
    # Beside a protected environment that carries it, an org-wide secret is not free.
    with pytest.raises(Forbidden) as refused:
        ops.environments.secrets.set("OPENAI_API_KEY", "x")
    assert refused.value.code == "approval_required"


def test_a_patch_that_unprotects_cannot_retarget_at_once_and_unprotecting_is_audited(client, team, target):
    environment, _ = protected_webhook(client, target)
    admin = team.member("ada", "admin")
    with pytest.raises(Forbidden) as refused:
        admin.environments.update(environment, protected=False, webhook_url=ATTACKER_URL)
    assert refused.value.code == "approval_required"
    assert [detail.field for detail in refused.value.details] == ["webhookUrl"]
    kept = client.environments.get(environment)
    assert kept.protected and kept.webhook_url == target.url
    # Unprotecting alone is the admin's direct act, and the audit trail names who did it.
    assert not admin.environments.update(environment, protected=False, required_approvals=2).protected
    event = client.audit.list(action="updateEnvironment", actor="ada@example.com").items[0]
    assert event.target.id == environment
    assert event.changes == {"protected": False, "requiredApprovals": 2}


def test_a_retarget_through_review_is_where_the_next_approved_deployment_posts(client, team, target):
    environment, name = protected_webhook(client, target)
    ana, bo = team.member("ana", "operator"), team.member("bo", "operator")
    moved_to = WebhookTarget()
    try:
        moved_to.key = target.key  # the environment's signing key, unchanged
        opened = ana.change_requests.open(
            "environment",
            {"action": "update", "environmentId": environment, "webhookUrl": moved_to.url},
            "The receiver moved",
        )
        assert opened.status == "open" and opened.target == f"environment {name}"
        assert opened.preview["changes"] == [
            {"field": "webhookUrl", "kind": "changed", "before": target.url, "after": moved_to.url}
        ]
        assert client.environments.get(environment).webhook_url == target.url
        applied = bo.change_requests.approve(opened.id)
        assert applied.status == "applied", applied.conflict
        assert applied.result == {"environmentId": environment, "name": name}
        assert client.environments.get(environment).webhook_url == moved_to.url

        deployment = ana.change_requests.open(
            "deployment", {"environmentId": environment, "agentStableKeys": ["triage"]}, "Release"
        )
        job = wait_for_end(client, bo.change_requests.approve(deployment.id).result["jobId"])
        assert job.status == "complete", job.message
        assert target.manifests == [] and len(moved_to.manifests) == 1 and moved_to.bad_signatures == 0
        assert moved_to.manifests[0]["agents"][0]["config"]["providerConfig"]["apiKey"] == "openai-one"
    finally:
        moved_to.close()


def test_a_signing_key_through_review_is_shown_once_and_is_the_one_that_signs(
    client, team, target, http, org, db, database_url
):
    environment, _ = protected_webhook(client, target)
    ana, bo = team.member("ana", "operator"), team.member("bo", "operator")
    old_key_made = client.environments.get(environment).signing_key_created_at
    opened = ana.change_requests.open(
        "environment", {"action": "signingKey", "environmentId": environment}, "Rotate after a leak"
    )
    key = opened.signing_key
    assert key is not None and key.startswith("whsec_") and key != target.key
    assert opened.preview["changes"] == [
        {
            "field": "signingKey",
            "kind": "changed",
            "before": format_timestamp(old_key_made),
            "after": "[new value]",
        }
    ]
    for seen in (
        json.dumps(opened.preview),
        json.dumps(opened.payload),
        reads_of(http, org),
        recorded_events(db),
    ):
        assert key not in seen
    assert not raw_database_contains(database_url, key)
    assert client.environments.get(environment).signing_key_created_at == old_key_made
    applied = bo.change_requests.approve(opened.id)
    assert applied.status == "applied", applied.conflict
    assert key not in applied.model_dump_json() + reads_of(http, org)
    assert client.environments.get(environment).signing_key_created_at > old_key_made

    target.key = key
    deployment = ana.change_requests.open(
        "deployment", {"environmentId": environment, "agentStableKeys": ["triage"]}, "Release"
    )
    job = wait_for_end(client, bo.change_requests.approve(deployment.id).result["jobId"])
    assert job.status == "complete", job.message
    assert target.bad_signatures == 0 and len(target.manifests) == 1


def reads_of(http: httpx.Client, org: Org) -> str:
    """Every answer that lists change requests or the audit trail, raw."""
    return "".join(
        http.get(path, params={"orgSlug": org.slug, "limit": 1000}, headers=org.headers).text
        for path in ("change-requests", "audit-events")
    )


def recorded_events(db: Database) -> str:
    """Every event and audit event, raw, as the database holds them."""
    with db.session() as session:
        events = [event.payload for event in session.scalars(select(EventRow))]
        audited = [event.changes for event in session.scalars(select(AuditEventRow))]
    return json.dumps(events) + json.dumps(audited)


def sealed(db: Database, change_request_id: str) -> str | None:
    with db.session() as session:
        return session.get_one(ChangeRequestRow, change_request_id).sealed


def secret_values(db: Database, settings, org: Org, environment: str) -> dict[str, str]:
    with db.session() as session:
        found = get_org(session, slug=org.slug)
        assert found is not None
        return decrypt_secret_values(
            session,
            cipher=cipher_for(settings),
            org_id=found.id,
            environment_id=environment,
            names=["ZENDESK_TOKEN", "OPENAI_API_KEY"],
        )


def test_a_secret_through_review_is_applied_and_its_value_never_shown(
    client, team, target, http, org, db, settings, database_url
):
    environment, name = protected_webhook(client, target)
    client.environments.update(environment, required_approvals=2)
    ana, bo, cy = (team.member(member, "operator") for member in ("ana", "bo", "cy"))
    value = f"sk-live-{uuid.uuid4().hex}"
    scoped = ana.change_requests.open(
        "environment",
        {"action": "setSecret", "name": "ZENDESK_TOKEN", "value": value, "environmentId": environment},
        "Rotated at Zendesk",
    )
    assert scoped.preview["secret"] == {
        "name": "ZENDESK_TOKEN",
        "environmentId": environment,
        "scope": f"environment {name}",
    }
    assert scoped.preview["changes"] == [
        {"field": "secrets.ZENDESK_TOKEN", "kind": "changed", "before": "version 1", "after": "[new value]"}
    ]
    assert scoped.required_approvals == 2 and "value" not in scoped.payload
    assert bo.change_requests.approve(scoped.id).status == "open"
    assert sealed(db, scoped.id) is not None  # encrypted, waiting
    applied = cy.change_requests.approve(scoped.id)
    assert applied.status == "applied" and applied.result["version"] == 2
    assert sealed(db, scoped.id) is None  # installed, so no longer kept in the request

    # Org-wide: the protected environment carries it, so its rule (2 approvals) applies.
    shared = ana.change_requests.open(
        "environment", {"action": "setSecret", "name": "OPENAI_API_KEY", "value": value}, "Rotated"
    )
    assert shared.preview["secret"]["scope"] == "organization-wide"
    assert shared.preview["carriedBy"] == [name] and shared.required_approvals == 2
    bo.change_requests.approve(shared.id)
    assert cy.change_requests.approve(shared.id).status == "applied"
    assert secret_values(db, settings, org, environment) == {"ZENDESK_TOKEN": value, "OPENAI_API_KEY": value}

    for seen in (
        scoped.model_dump_json(),
        shared.model_dump_json(),
        reads_of(http, org),
        recorded_events(db),
    ):
        assert value not in seen
    assert not raw_database_contains(database_url, value)

    # Shadowed by the environment's own, an organization-wide ZENDESK_TOKEN is free; deleting the
    # environment's own makes the environment carry it, and the preview says so.
    client.environments.secrets.set("ZENDESK_TOKEN", "org-wide-zendesk")
    removal = ana.change_requests.open(
        "environment",
        {"action": "deleteSecret", "secretId": secret_id(client, "ZENDESK_TOKEN", environment)},
        "Zendesk is gone",
    )
    assert removal.preview["changes"] == [
        {"field": "secrets.ZENDESK_TOKEN", "kind": "removed", "before": "version 2", "after": None}
    ]
    assert removal.preview["notes"] == [
        "The environment then carries the organization-wide ZENDESK_TOKEN (version 1)."
    ]
    bo.change_requests.approve(removal.id)
    assert cy.change_requests.approve(removal.id).result["deleted"] is True
    assert secret_values(db, settings, org, environment) == {
        "OPENAI_API_KEY": value,
        "ZENDESK_TOKEN": "org-wide-zendesk",
    }


def test_a_rename_through_review_leaves_the_old_name_protected(client, team, target):
    environment, name = protected_webhook(client, target)
    ana, bo = team.member("ana", "operator"), team.member("bo", "operator")
    opened = ana.change_requests.open(
        "environment", {"action": "update", "environmentId": environment, "name": "prod-us"}, "Regions"
    )
    assert opened.preview["changes"] == [
        {"field": "name", "kind": "changed", "before": name, "after": "prod-us"}
    ]
    assert any(f"'{name}' stays protected" in note for note in opened.preview["notes"])
    applied = bo.change_requests.approve(opened.id)
    assert applied.status == "applied", applied.conflict
    renamed = client.environments.get(environment)
    assert (renamed.name, renamed.protected, renamed.webhook_url) == ("prod-us", True, target.url)
    holder = client.environments.get(applied.result["nameHeldBy"])
    assert (holder.name, holder.protected, holder.target, holder.webhook_url) == (name, True, "builtin", None)
    # No moment at which the old name is free: it cannot be taken, and deploying there needs review.
    with pytest.raises(BadRequest) as taken:
        ana.environments.create(name, target="webhook", webhook_url=ATTACKER_URL)
    assert taken.value.code == "already_exists"
    with pytest.raises(Forbidden) as deploying:
        ana.deployments.deploy(holder.id, ["triage"])
    assert deploying.value.code == "approval_required"


def test_a_delete_and_a_tool_record_through_review(client, team, target):
    environment, name = protected_webhook(client, target)
    ana, bo = team.member("ana", "operator"), team.member("bo", "operator")
    record = {
        "action": "toolDeployment",
        "toolName": "Search tickets",
        "toolKey": "zendesk.search",
        "environment": name,
        "provider": "zendesk",
        "toolId": "search-2",
        "version": "2",
        "hash": "h2",
        "toolProviderConfig": {"region": "eu", "apiKey": "k-123"},
    }
    opened = ana.change_requests.open("environment", record, "Search v2")
    assert opened.target == f"environment {name} (tool zendesk.search)"
    assert {change["field"]: (change["before"], change["after"]) for change in opened.preview["changes"]} == {
        "toolId": ("search-1", "search-2"),
        "version": ("1", "2"),
        "hash": ("h1", "h2"),
        "toolProviderConfig.region": (None, "eu"),
        "toolProviderConfig.apiKey": (None, "[redacted]"),
    }
    assert bo.change_requests.approve(opened.id).status == "applied"
    recorded = client.tool_deployments.list(environment=name).items[0]
    assert (recorded.version, recorded.history_count) == ("2", 1)

    deletion = ana.change_requests.open(
        "environment", {"action": "delete", "environmentId": environment}, "Gone"
    )
    assert deletion.target == f"environment {name} (delete)"
    assert {change["field"] for change in deletion.preview["changes"]} == {
        "name",
        "description",
        "target",
        "webhookUrl",
    }
    assert any("free again" in note for note in deletion.preview["notes"])
    assert bo.change_requests.approve(deletion.id).result == {"environmentId": environment, "deleted": True}
    assert all(e.id != environment for e in client.environments.list(limit=1000).items)


def test_a_change_whose_environment_moved_ends_in_conflict(client, team, target):
    environment, name = protected_webhook(client, target)
    ana, bo = team.member("ana", "operator"), team.member("bo", "operator")
    payloads = [
        {"action": "update", "environmentId": environment, "webhookUrl": "https://a.example.com/x"},
        {"action": "setSecret", "name": "ZENDESK_TOKEN", "value": "v", "environmentId": environment},
        {"action": "signingKey", "environmentId": environment},
        {
            "action": "toolDeployment",
            "toolName": "Search tickets",
            "toolKey": "zendesk.search",
            "environment": name,
            "provider": "zendesk",
            "toolId": "search-1",
            "version": "3",
            "hash": "h3",
        },
    ]
    for payload in payloads:
        first, second = (
            ana.change_requests.open("environment", payload, reason) for reason in ("One", "Two")
        )
        assert bo.change_requests.approve(first.id).status == "applied", payload["action"]
        conflicted = bo.change_requests.approve(second.id)
        assert conflicted.status == "conflict" and conflicted.result is None, payload["action"]
        assert "changed since the request was opened" in conflicted.conflict
    # What an admin changes directly (here, unprotecting and renaming) moves it too.
    deletion = ana.change_requests.open(
        "environment", {"action": "delete", "environmentId": environment}, "Gone"
    )
    client.environments.update(environment, protected=False)
    client.environments.update(environment, name="renamed")
    assert bo.change_requests.approve(deletion.id).status == "conflict"
    assert client.environments.get(environment).name == "renamed"


def test_bad_environment_payloads_are_400_naming_the_field(client, team, target, http, org):
    environment, _ = protected_webhook(client, target)
    cases = [
        ({"environmentId": environment, "name": "x"}, "payload.action"),
        ({"action": "rename", "environmentId": environment}, "payload.action"),
        ({"action": "update", "environmentId": environment, "protected": False}, "payload.protected"),
        ({"action": "update", "webhookUrl": "https://a.example.com"}, "payload.environmentId"),
        ({"action": "update", "environmentId": environment, "webhookUrl": "ftp://a"}, "payload.webhookUrl"),
        ({"action": "update", "environmentId": environment, "target": "webhook"}, "payload"),
        ({"action": "setSecret", "name": "lower", "value": "v"}, "payload.name"),
        ({"action": "setSecret", "name": "TOKEN", "value": ""}, "payload.value"),
        (
            {"action": "setSecret", "name": "TOKEN", "value": "v", "environmentId": "env_nope"},
            "environmentId",
        ),
        (
            {
                "action": "toolDeployment",
                "environment": "nowhere",
                "toolName": "t",
                "toolKey": "t",
                "provider": "p",
                "toolId": "i",
                "version": "1",
                "hash": "h",
            },
            "environment",
        ),
    ]
    for payload, field in cases:
        body = {"orgSlug": org.slug, "kind": "environment", "payload": payload, "reason": "x"}
        response = http.post("change-requests", json=body, headers=org.headers)
        assert response.status_code == 400, (payload, response.text)
        assert response.json()["details"][0]["field"] == field, payload
    with pytest.raises(Forbidden) as author:
        team.member("dee", "author").change_requests.open(
            "environment", {"action": "signingKey", "environmentId": environment}, "x"
        )
    assert author.value.code == "insufficient_role" and "operator" in author.value.message
    assert client.change_requests.list().items == []

"""The audit trail: one event per change, in the change's transaction, with its actor and request.

A walk through the organization's life as people make it (members and keys, agents, registries,
environments and secrets, deployments, notifications, providers, policies) checks after each
write that it left exactly one event naming its actor and its target; the walk must reach every
operation that writes, so a new one without an event, or without a walk step, fails here.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from api import OrgdeckClient
from api.audit import AuditEvent, AuditTarget
from tests.conftest import Org, count_rows, wait_for
from tests.processes import free_port
from tests.test_deployments import wait_for_end

SECRET = "s3cr3t-value-never-audited"


def closed_port_url() -> str:
    return f"http://127.0.0.1:{free_port()}/hook"


# Operations that write, reached by no step of the walk, each with the reason.
NOT_WALKED: dict[str, str] = {
    "signOut": "ends an identity provider's token, which the walk's key is not: tests/test_sign_in.py",
    "tryPrompt": "calls a model, which the walk has none of: tests/test_registries_try.py checks its event",
}


class Walk:
    """Calls the API as one person and checks each write left exactly one event, theirs."""

    def __init__(self, client: OrgdeckClient, http: httpx.Client, org: Org) -> None:
        self.client, self.http, self.org = client, http, org
        self.actions: set[str] = set()
        self.me = client.whoami()
        self.targets: dict[str, AuditTarget] = {}

    def write(self, action: str, call: Callable[[], Any], *, applying: str | None = None) -> Any:
        """`applying`: the action of the change an approval applies, whose event (its requester's)
        comes with the approval's, in the same transaction (so in either order)."""
        before = self.events()
        result = call()
        new = [e for e in self.events() if e.id not in {b.id for b in before}]
        expected = [action] if applying is None else [action, applying]
        assert sorted(e.action for e in new) == sorted(expected), (action, [e.action for e in new])
        event = next(e for e in new if e.action == action)
        assert event.actor.key_id == self.me.key_id
        assert event.actor.member_id == (self.me.member.id if self.me.member else None)
        assert event.request_id
        assert event.target.type and event.target.id, (action, event.target)
        self.actions.add(action)
        self.targets[action] = event.target
        return result

    def events(self) -> list[AuditEvent]:
        return self.client.audit.list(limit=1000).items


@pytest.fixture
def walk(server, db, org, http) -> Walk:
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as client:
        admin = client.members.create("admin@example.com", "Admin", "admin")
        key = client.api_keys.create("admin-laptop", member_id=admin.id).key
    return Walk(OrgdeckClient(server.url, key, org_slug=org.slug), http, org)


def test_every_write_leaves_one_event_naming_its_actor(walk, document_writes):
    c = walk.client
    member = walk.write("createMember", lambda: c.members.create("dev@example.com", "Dev", "author"))
    walk.write("updateMember", lambda: c.members.update(member.id, role="operator"))
    key = walk.write("createApiKey", lambda: c.api_keys.create("dev-key", member_id=member.id))
    walk.write("revokeApiKey", lambda: c.api_keys.revoke(key.id))
    walk.write("deactivateMember", lambda: c.members.deactivate(member.id))

    walk.write("createAgent", lambda: c.agents.create("triage", "openai", provider_config={"model": "m"}))
    walk.write("updateAgent", lambda: c.agents.update("triage", name="Triage"))
    version = walk.write("createAgentVersion", lambda: c.agents.snapshot("triage"))
    walk.write("createAgent", lambda: c.agents.create("old", "openai"))
    walk.write("archiveAgent", lambda: c.agents.archive("old"))

    environment = walk.write("createEnvironment", lambda: c.environments.create("staging"))
    walk.write("updateEnvironment", lambda: c.environments.update(environment.id, description="Stage"))
    secret = walk.write("setSecret", lambda: c.environments.secrets.set("TOKEN", SECRET))
    walk.write("deleteSecret", lambda: c.environments.secrets.delete(secret.id))
    spare = walk.write("createEnvironment", lambda: c.environments.create("spare"))
    walk.write("deleteEnvironment", lambda: c.environments.delete(spare.id))
    hook = walk.write(
        "createEnvironment",
        lambda: c.environments.create("edge", target="webhook", webhook_url="https://hooks.example.com/x"),
    )
    walk.write("createSigningKey", lambda: c.deployments.create_signing_key(hook.id))

    fleet = walk.write("createFleet", lambda: c.fleets.create("core", environment_ids=[environment.id]))
    walk.write("updateFleet", lambda: c.fleets.update(fleet.id, description="Core agents"))
    job = walk.write("deploy", lambda: c.deployments.deploy(environment.id, ["triage"]))
    wait_for_end(c, job.id)
    later = walk.write("createEnvironment", lambda: c.environments.create("later"))
    wait_for_end(c, walk.write("promote", lambda: c.deployments.promote(environment.id, later.id)).id)
    c.agents.update("triage", fleet_id=fleet.id)
    walk.actions.add("updateAgent")
    wait_for_end(
        c, walk.write("deployFleet", lambda: c.deployments.deploy_fleet(fleet.id, environment.id)).id
    )
    walk.write("deleteFleet", lambda: c.fleets.delete(fleet.id))
    # A rollout waiting ten minutes between its two waves: each transition is the person's.
    c.agents.create("second", "openai", provider_config={"model": "m"})
    c.agents.snapshot("second")
    waves = {"waveSize": 1, "pauseSeconds": 600}
    rollout = c.deployments.deploy(environment.id, ["triage", "second"], strategy=waves)
    walk.write("pauseDeploymentJob", lambda: c.deployments.pause(rollout.id))
    walk.write("resumeDeploymentJob", lambda: c.deployments.resume(rollout.id))
    walk.write("abortDeploymentJob", lambda: c.deployments.abort(rollout.id))
    wait_for_end(c, rollout.id)
    walk.write("updateDeploymentSettings", lambda: c.deployments.update_settings(stale_after_days=3))

    tool = walk.write("createTool", lambda: c.tools.create("search", "search-v1"))
    walk.write("updateTool", lambda: c.tools.update(tool.id, description="Finds"))
    walk.write(
        "recordToolDeployment",
        lambda: c.tool_deployments.record(
            tool_name="search",
            tool_key="search-v1",
            environment="staging",
            provider="mcp",
            tool_id=tool.id,
            version="1",
            hash="h1",
        ),
    )
    walk.write("deleteTool", lambda: c.tools.delete(tool.id))

    walk.write("createRegistry", lambda: c.registries.create("prompts"))
    ref = f"{walk.org.slug}/prompts"
    walk.write("publishArtifact", lambda: c.registries.publish(ref, "greeting", "Hello {{name}}"))
    published = walk.write("publishArtifact", lambda: c.registries.publish(ref, "greeting", "Hi {{name}}"))
    labelled = walk.write("moveLabel", lambda: c.registries.move_label(ref, "greeting", "production", "1"))
    walk.write("deleteRegistry", lambda: c.registries.delete(ref))
    walk.write("restoreRegistry", lambda: c.registries.restore(ref))

    channel = walk.write(
        "createChannel",
        lambda: c.notifications.create_channel("hook", "webhook", url="https://hooks.example.com/h"),
    )
    walk.write("subscribe", lambda: c.notifications.subscribe(channel.id, "deployment.error"))
    walk.write("unsubscribe", lambda: c.notifications.unsubscribe(channel.id, "deployment.error"))
    walk.write("updateChannel", lambda: c.notifications.update_channel(channel.id, name="Hook"))
    walk.write("rotateSecret", lambda: c.notifications.rotate_secret(channel.id))
    refused = walk.write(
        "createChannel", lambda: c.notifications.create_channel("closed", "webhook", url=closed_port_url())
    )
    test = walk.write("testChannel", lambda: c.notifications.test_channel(refused.id))
    wait_for(
        lambda: c.notifications.delivery(test.id).status in {"failed", "dead"},
        what="the failed test delivery",
    )
    walk.write(
        "recover", lambda: c.notifications.recover(refused.id, since=datetime.now(UTC) - timedelta(hours=1))
    )
    walk.write("resend", lambda: c.notifications.resend(test.id))
    walk.write("deleteChannel", lambda: c.notifications.delete_channel(channel.id))
    walk.write("signIn", c.sign_in)
    trusted = walk.write(
        "createWorkloadIdentity",
        lambda: c.workload_identities.create(
            "deploy",
            "https://token.actions.githubusercontent.com",
            "orgdeck",
            [{"claim": "repository", "equals": "acme/agents"}],
            "operator",
        ),
    )
    walk.write("updateWorkloadIdentity", lambda: c.workload_identities.update(trusted.id, role="author"))
    walk.write("deleteWorkloadIdentity", lambda: c.workload_identities.delete(trusted.id))

    provider = walk.write(
        "createProvider", lambda: c.providers.create("team", "openai", api_key="sk-" + SECRET)
    )
    walk.write("updateProvider", lambda: c.providers.update(provider.id, name="Team"))
    walk.write("deleteProvider", lambda: c.providers.delete(provider.id))

    policy = walk.write("createPolicy", lambda: c.policies.create("no-secrets", "Never log secrets."))
    walk.write("updatePolicy", lambda: c.policies.update(policy.id, rule_text="Never log secrets, ever."))
    tomorrow = datetime.now(UTC) + timedelta(days=1)
    granted = walk.write(
        "createException",
        lambda: c.policies.create_exception(policy.id, "A last release", tomorrow, agent_stable_key="triage"),
    )
    walk.write("revokeException", lambda: c.policies.revoke_exception(granted.id))
    walk.write("deletePolicy", lambda: c.policies.delete(policy.id))

    walk_change_requests(walk, environment.id)

    missing = document_writes - walk.actions - NOT_WALKED.keys()
    assert not missing, f"writes the walk does not reach: {sorted(missing)}"
    # Answers without an id of their own name what they belong to; settings, the organization.
    assert walk.targets["createSigningKey"] == AuditTarget(type="environment", id=hook.id)
    assert walk.targets["recover"] == AuditTarget(type="channel", id=refused.id)
    org = walk.targets["updateSettings"]
    assert (org.type, org.id.startswith("org_"), org.name) == ("org_settings", True, "Test Org")
    assert walk.targets["updateDeploymentSettings"] == org.model_copy(update={"type": "deployment_settings"})
    assert walk.targets["createAgentVersion"] == AuditTarget(
        type="agent_version", id=version.id, name="triage"
    )
    assert walk.targets["publishArtifact"] == AuditTarget(type="artifact", id=published.id, name="greeting")
    assert walk.targets["moveLabel"] == AuditTarget(type="artifact_version", id=labelled.id, name="greeting")


def walk_change_requests(walk: Walk, environment_id: str) -> None:
    """Protection rules, settings, and a change request opened, cancelled, rejected and approved:
    requests another member opens are theirs (walked, not checked), reviews are the walker's."""
    c = walk.client
    walk.write("updateEnvironment", lambda: c.environments.update(environment_id, protected=True))
    walk.write(
        "updateRegistry",
        lambda: c.registries.update(f"{walk.org.slug}/prompts", protected_labels=["production"]),
    )
    walk.write("updateSettings", lambda: c.settings.update(change_request_ttl_days=14))
    payload = {"environmentId": environment_id, "agentStableKeys": ["triage"]}
    own = walk.write("openChangeRequest", lambda: c.change_requests.open("deployment", payload, "Mine"))
    walk.write("cancelChangeRequest", lambda: c.change_requests.cancel(own.id))
    member = c.members.create("ops@example.com", "Ops", "operator")
    with OrgdeckClient(
        c.base_url, c.api_keys.create("ops-key", member_id=member.id).key, org_slug=walk.org.slug
    ) as ops:
        theirs = [ops.change_requests.open("deployment", payload, f"Release {n}") for n in range(2)]
    walk.write("rejectChangeRequest", lambda: c.change_requests.reject(theirs[0].id, comment="No"))
    applied = walk.write(
        "approveChangeRequest", lambda: c.change_requests.approve(theirs[1].id), applying="deploy"
    )
    assert applied.status == "applied"
    wait_for_end(c, applied.result["jobId"])


@pytest.fixture
def document_writes(server) -> set[str]:
    """The operationIds of every operation that may write (POST, PUT, PATCH, DELETE), less the
    reads sent as POST (lists, previews, drafting, connection tests)."""
    # The first document is built on demand: on a busy machine that takes longer than the default 5 s.
    document = httpx.get(f"{server.url}/openapi.json", timeout=60).json()
    reads = {
        "listAgents",
        "listEnvironments",
        "previewDeployment",
        "previewPromotion",
        "generatePolicyPrompt",
        "testProvider",
        "testPolicy",
        "testUnsavedPolicy",
    }
    return {
        operation["operationId"]
        for item in document["paths"].values()
        for method, operation in item.items()
        if method in {"post", "put", "patch", "delete"} and operation["operationId"] not in reads
    }


def test_events_hold_no_secret_and_name_what_was_set(walk, database_url):
    c = walk.client
    walk.write("setSecret", lambda: c.environments.secrets.set("API_TOKEN", SECRET))
    walk.write("createProvider", lambda: c.providers.create("p", "openai", api_key="sk-" + SECRET))
    slack = walk.write(
        "createChannel",
        lambda: c.notifications.create_channel(
            "s", "slack", url=f"https://hooks.slack.com/services/T/B/{SECRET}"
        ),
    )
    assert slack.id
    events = {e.action: e for e in walk.events()}
    assert events["setSecret"].changes == {"name": "API_TOKEN", "value": "[redacted]"}
    assert events["setSecret"].target.type == "secret" and events["setSecret"].target.name == "API_TOKEN"
    assert events["createProvider"].changes["apiKey"] == "[redacted]"
    assert events["createChannel"].changes["config"]["url"] == "https://hooks.slack.com/…"
    assert SECRET not in str([e.model_dump() for e in walk.events()])


def test_a_write_that_changes_nothing_leaves_no_event(walk):
    """Every PATCH and PUT, and the writes like them (subscribing again, re-sending a tool's record,
    moving a label where it is), sent with what is stored: nothing changes, so no event."""
    c = walk.client
    member = c.members.create("dev@example.com", "Dev", "author")
    environment = c.environments.create("staging", description="Stage")
    fleet = c.fleets.create("core", description="Core", environment_ids=[environment.id])
    c.agents.create(
        "triage", "openai", tags=["b", "a"], provider_config={"model": "m", "apiKey": "sk-" + SECRET}
    )
    c.agents.update("triage", fleet_id=fleet.id)
    tool = c.tools.create("search", "search-v1", description="Finds")
    record = {
        "tool_name": "search",
        "tool_key": "search-v1",
        "environment": "staging",
        "provider": "mcp",
        "tool_id": tool.id,
        "version": "1",
        "hash": "h1",
        "tool_provider_config": {"timeoutSeconds": 20},
    }
    c.tool_deployments.record(**record)
    provider = c.providers.create("team", "openai", api_key="sk-" + SECRET)
    hook = c.notifications.create_channel("hook", "webhook", url="https://hooks.example.com/h")
    slack = c.notifications.create_channel(
        "slack", "slack", url=f"https://hooks.slack.com/services/T/B/{SECRET}"
    )
    c.notifications.subscribe(hook.id, "deployment.error")
    policy = c.policies.create("no-secrets", "Never log secrets.")
    ref = c.registries.create("prompts").registry_ref
    c.registries.publish(ref, "greeting", "Hello {{name}}", labels=["production"])
    c.deployments.update_settings(stale_after_days=3)
    c.settings.update(change_request_ttl_days=14)
    agent = c.agents.get("triage")
    unchanged: dict[str, Callable[[], Any]] = {
        "updateMember": lambda: c.members.update(member.id, name="Dev", role="author"),
        "updateAgent": lambda: c.agents.update(
            "triage",
            name=agent.name,
            tags=["a", "b"],
            provider=agent.provider,
            provider_config=agent.provider_config,
            prompt_references={},
            fleet_id=fleet.id,
        ),
        "updateEnvironment": lambda: c.environments.update(
            environment.id, name="staging", description="Stage"
        ),
        "updateFleet": lambda: c.fleets.update(
            fleet.id, name="core", description="Core", environment_ids=[environment.id]
        ),
        "updateTool": lambda: c.tools.update(tool.id, name="search", description="Finds"),
        "recordToolDeployment": lambda: c.tool_deployments.record(**record),
        "updateProvider": lambda: c.providers.update(provider.id, name="team", api_key="sk-" + SECRET),
        "updateChannel (webhook)": lambda: c.notifications.update_channel(
            hook.id, name="hook", enabled=True, url="https://hooks.example.com/h"
        ),
        "updateChannel (slack)": lambda: c.notifications.update_channel(
            slack.id, url=f"https://hooks.slack.com/services/T/B/{SECRET}"
        ),
        "subscribe": lambda: c.notifications.subscribe(hook.id, "deployment.error"),
        "updatePolicy": lambda: c.policies.update(policy.id, rule_text="Never log secrets."),
        "updateRegistry": lambda: c.registries.update(ref, protected_labels=[]),
        "restoreRegistry": lambda: c.registries.restore(ref),
        "publishArtifact": lambda: c.registries.publish(ref, "greeting", "Hello {{name}}"),
        "moveLabel": lambda: c.registries.move_label(ref, "greeting", "production", "1"),
        "updateDeploymentSettings": lambda: c.deployments.update_settings(stale_after_days=3),
        "updateSettings": lambda: c.settings.update(change_request_ttl_days=14),
    }
    for write, call in unchanged.items():
        before = walk.events()
        call()
        assert [event.action for event in walk.events() if event not in before] == [], write


def test_a_failed_request_and_a_read_leave_no_event(walk, db):
    before = count_rows(db, "audit_events")
    c = walk.client
    with pytest.raises(Exception):  # noqa: B017 (any refusal will do)
        c.agents.create("Bad Key!", "openai")
    c.agents.list()
    c.environments.list()
    assert count_rows(db, "audit_events") == before


def test_an_event_is_never_changed_or_removed(walk, db):
    walk.write("createAgent", lambda: walk.client.agents.create("kept", "openai"))
    statements = ["UPDATE audit_events SET action = 'x'", "DELETE FROM audit_events"]
    if db.engine.dialect.name == "postgresql":
        statements.append("TRUNCATE audit_events")  # SQLite has none; its DELETE is refused above
    for statement in statements:
        with pytest.raises(DBAPIError, match="append-only"), db.session(write=True) as session:
            session.execute(text(statement))
    assert any(e.action == "createAgent" for e in walk.events())


def test_events_filter_by_actor_action_target_and_page_by_cursor(walk, server, org):
    c = walk.client
    for name in ("a1", "a2", "a3"):
        walk.write("createAgent", lambda name=name: c.agents.create(name, "openai"))
    by_action = c.audit.list(action="createAgent")
    assert [e.target.name for e in by_action.items] == ["a3", "a2", "a1"]
    target = by_action.items[0].target
    assert [e.action for e in c.audit.list(target_type="agent", target_id=target.id).items] == ["createAgent"]
    me = walk.me.member
    assert me is not None
    assert {e.id for e in c.audit.list(actor=me.email).items} == {
        e.id for e in c.audit.list(actor=me.id).items
    }
    assert c.audit.list(actor="nobody@example.com").items == []
    first = c.audit.list(limit=2)
    assert len(first.items) == 2 and first.next_cursor
    second = c.audit.list(limit=2, cursor=first.next_cursor)
    assert not {e.id for e in first.items} & {e.id for e in second.items}
    both = first.items + second.items
    assert all(newer.id > older.id for newer, older in itertools.pairwise(both))


def test_every_answer_carries_a_request_id(http, org):
    own = http.get("whoami", headers={**org.headers, "X-Request-Id": "ci-run-42.step:7"})
    assert own.headers["x-request-id"] == "ci-run-42.step:7"
    made = http.get("whoami", headers={**org.headers, "X-Request-Id": "not valid!"})
    assert made.headers["x-request-id"].startswith("req_")
    assert http.get("no-such-route").headers["x-request-id"].startswith("req_")
    assert http.post("api-keys", content=b"x" * 2_000_000, headers=org.headers).headers["x-request-id"]


def test_the_trail_is_exactly_what_the_models_render(http, org, db):
    """The database writes each event's JSON: AuditEvent's fields, values and order, its actor and
    target nested, its changes as they were kept, timestamps cut to the millisecond."""
    from random import Random

    from sqlalchemy import select

    from service.orgs.models import OrganizationRow
    from service.storage.ids import new_id
    from service.trail.models import AuditEventRow

    rng = Random(3)
    texts = ['say "hi"\n', "naïve — ünïcode ✓", "back\\slash\ttab", "", None]
    start = datetime(2025, 6, 1, tzinfo=UTC)
    with db.session(write=True) as session:
        org_id = session.scalar(select(OrganizationRow.id).where(OrganizationRow.slug == org.slug))
        for index in range(17):
            at = start + timedelta(seconds=index * 997, microseconds=rng.choice([0, 999, 999_999, 123_456]))
            changes = {
                "name": rng.choice(texts),
                "limits": {"rpm": rng.randint(0, 9), "on": rng.random() < 0.5},
            }
            if index % 3 == 0:
                changes = {}
            session.add(
                AuditEventRow(
                    id=new_id("aud", at=at),
                    org_id=org_id,
                    occurred_at=at,
                    actor_key_id=rng.choice(["key_x", None]),
                    actor_key_name=rng.choice(texts),
                    actor_member_id=rng.choice(["mem_y", None]),
                    actor_member_email=rng.choice(["a@b.example", None]),
                    action="updateThing",
                    target_type=rng.choice(["agent", None]),
                    target_id=rng.choice(texts),
                    target_name=rng.choice(texts),
                    request_id=rng.choice(["req_1", None]),
                    changes=changes,
                )
            )
    with db.session() as session:
        rows = session.scalars(
            select(AuditEventRow).where(AuditEventRow.org_id == org_id, AuditEventRow.action == "updateThing")
        ).all()
        expected = [
            AuditEvent.model_validate(
                {
                    "id": row.id,
                    "occurred_at": row.occurred_at,
                    "actor": {
                        name: getattr(row, f"actor_{name}")
                        for name in ("key_id", "key_name", "member_id", "member_email")
                    },
                    "action": row.action,
                    "target": {name: getattr(row, f"target_{name}") for name in ("type", "id", "name")},
                    "request_id": row.request_id,
                    "changes": row.changes,
                }
            ).model_dump(mode="json")
            for row in sorted(rows, key=lambda row: row.id, reverse=True)
        ]
    listed, cursor = [], None
    while True:
        params = {"orgSlug": org.slug, "action": "updateThing", "limit": 5} | (
            {"cursor": cursor} if cursor else {}
        )
        response = http.get("audit-events", params=params, headers=org.headers)
        assert response.status_code == 200, response.text
        listed += response.json()["items"]
        cursor = response.json()["nextCursor"]
        if cursor is None:
            break
    assert len(listed) == 17
    assert listed == expected

    def shape(value: Any) -> Any:  # every object's keys in order, all the way down
        if isinstance(value, dict):
            return [(key, shape(item)) for key, item in value.items()]
        return [shape(item) for item in value] if isinstance(value, list) else None

    assert shape(listed) == shape(expected)

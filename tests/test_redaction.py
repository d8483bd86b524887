"""Credentials in free-form objects (service/redaction/objects.py): planted in every object a request can
carry, they reach no reader (the audit trail, the records of agents, versions, tools and artifacts,
previews, jobs, history, the status matrix and its events, change requests), and a write that sends
back what a reader was shown keeps them, while what is deployed still carries the real values."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from api import OrgdeckClient
from service.agents.models import AgentRow
from service.deployments.models import DeploymentJobAgentRow
from service.events.models import EventRow
from service.orgs.models import OrganizationRow
from service.registries.models import RegistryArtifactVersionRow
from service.tools.models import ToolDeploymentRow, ToolRow
from tests.conftest import Org
from tests.test_deployments import wait_for_end

PLACES = ("agent", "agent-list", "draft", "override", "preview", "schema", "tool", "metadata", "change")


def org_id_of(session: Session, org: Org) -> str:
    return session.scalar(select(OrganizationRow.id).where(OrganizationRow.slug == org.slug))


@pytest.fixture
def planted() -> dict[str, str]:
    """One credential per place it is planted, each unique, so a leak names its place."""
    return {place: f"{place}-{uuid.uuid4().hex}" for place in PLACES}


@pytest.fixture
def viewer(server, client: OrgdeckClient, org: Org) -> Iterator[httpx.Client]:
    """The API over HTTP as a member who may only read."""
    member = client.members.create("viewer@example.com", "Viewer", "viewer")
    key = client.api_keys.create("viewer-key", member_id=member.id).key
    with httpx.Client(base_url=server.url + "/", headers={"X-API-Key": key}, timeout=30) as http:
        yield http


def test_planted_credentials_reach_no_reader(client, viewer, org, db, planted):
    c, slug = client, org.slug
    staging = c.environments.create("staging").id
    prompts = c.registries.create("prompts").registry_ref
    c.registries.publish(
        prompts, "triage", "Sort tickets.", metadata={"owner": "ops", "apiKey": planted["metadata"]}
    )
    c.agents.create(
        "alpha",
        "openai",
        provider_config={
            "model": "m",
            "apiKey": planted["agent"],
            "servers": [{"token": planted["agent-list"]}],
        },
        prompt_references={"triage": f"{prompts}/triage@production"},
    )
    c.agents.snapshot("alpha")
    tool = c.tools.create(
        "Search",
        "search",
        input_schema={"type": "object", "properties": {}, "client_secret": planted["schema"]},
    )
    c.tool_deployments.record(
        tool_name="Search",
        tool_key="search",
        environment="staging",
        provider="mcp",
        tool_id=tool.id,
        version="1",
        hash="h1",
        tool_provider_config={"endpoint": "https://tools.example.com", "auth": {"token": planted["tool"]}},
    )
    job = c.deployments.deploy(
        staging,
        ["alpha"],
        tool_refs=["search"],
        prompt_name="triage",
        version="1",
        agent_provider_config={"password": planted["override"]},
    )
    wait_for_end(c, job.id)
    # A draft edit the running version does not have: drift, with a credential nested in the diff.
    c.agents.update(
        "alpha",
        provider_config={
            "model": "m",
            "apiKey": planted["agent"],
            "servers": [{"token": planted["agent-list"]}],
            "headers": {"Authorization": f"Bearer {planted['draft']}"},
        },
    )
    change = c.change_requests.open(
        "deployment",
        {
            "environmentId": staging,
            "agentStableKeys": ["alpha"],
            "agentProviderConfig": {"secretKey": planted["change"]},
        },
        "Rotate the key",
    )
    preview = viewer.post(
        "agents/deployments/preview",
        json={
            "orgSlug": slug,
            "environmentId": staging,
            "agentStableKeys": ["alpha"],
            "agentProviderConfig": {"api_key": planted["preview"]},
        },
    )

    answers = [preview] + [
        viewer.get(path, params={"orgSlug": slug, **params})
        for path, params in [
            ("audit-events", {"limit": 1000}),
            ("agents/alpha", {}),
            ("agents/alpha/versions", {}),
            ("agents/alpha/versions/1", {}),
            ("tools", {}),
            (f"tools/{tool.id}", {}),
            ("agents/tool-deployment-records", {}),
            ("registries/artifacts/versions", {"registryRef": prompts, "name": "triage"}),
            ("registries/artifacts/retrieve", {"registryRef": prompts, "name": "triage", "version": "1"}),
            ("agents/deployment-jobs", {}),
            (f"agents/deployment-jobs/{job.id}", {}),
            ("agents/deployments/history", {}),
            ("agents/deployments/status", {}),
            ("change-requests", {}),
            (f"change-requests/{change.id}", {}),
        ]
    ]
    answers.append(viewer.post("agents/list", json={"orgSlug": slug}))
    assert all(answer.status_code == 200 for answer in answers), [a.text for a in answers if a.is_error]
    with db.session() as session:
        in_org = EventRow.org_id == org_id_of(session, org)
        events = session.execute(select(EventRow.type, EventRow.payload).where(in_org)).all()
    # Events are what notifications send: their bodies are the payloads.
    assert {"deployment.complete", "agent.drifted", "change_request.opened"} <= {type for type, _ in events}
    read = "\n".join([answer.text for answer in answers] + [json.dumps(payload) for _, payload in events])
    leaked = [place for place, secret in planted.items() if secret in read]
    assert not leaked, f"credentials planted in {leaked} reach a reader"
    assert read.count("[redacted]") >= len(PLACES), "nothing was redacted: the reads checked nothing"


def test_what_a_reader_was_shown_written_back_keeps_the_credentials(client, db, org, planted):
    c = client
    config = {"model": "m", "apiKey": planted["agent"], "servers": [{"token": planted["agent-list"]}]}
    c.agents.create("alpha", "openai", provider_config=config)
    shown = c.agents.get("alpha").provider_config
    assert shown == {"model": "m", "apiKey": "[redacted]", "servers": [{"token": "[redacted]"}]}
    trail = len(c.audit.list(limit=1000).items)

    c.agents.update("alpha", provider_config=shown)  # the console's edit form, saved unchanged
    assert len(c.audit.list(limit=1000).items) == trail, "writing back what was shown changed something"
    c.agents.update("alpha", provider_config={**shown, "temperature": 0.5})
    (event, *_) = c.audit.list(action="updateAgent").items
    assert event.changes["providerConfig"] == {**shown, "temperature": 0.5}

    tool = c.tools.create(
        "Search", "search", input_schema={"type": "object", "client_secret": planted["schema"]}
    )
    c.tools.update(tool.id, input_schema=c.tools.get(tool.id).input_schema, description="Finds")
    staging = c.environments.create("staging")
    record = {
        "tool_name": "Search",
        "tool_key": "search",
        "environment": staging.name,
        "provider": "mcp",
        "tool_id": tool.id,
        "version": "1",
        "hash": "h1",
    }
    sent = c.tool_deployments.record(**record, tool_provider_config={"auth": {"token": planted["tool"]}})
    c.tool_deployments.record(**record, tool_provider_config=sent.tool_provider_config)
    prompts = c.registries.create("prompts").registry_ref
    first = c.registries.publish(prompts, "triage", "Sort.", metadata={"apiKey": planted["metadata"]})
    second = c.registries.publish(prompts, "triage", "Sort tickets.", metadata=first.metadata)
    c.agents.snapshot("alpha")
    job = c.deployments.deploy(
        staging.id, ["alpha"], agent_provider_config={"apiKey": "[redacted]", "seed": 7}
    )

    with db.session() as session:
        agent = select(AgentRow.provider_config).where(
            AgentRow.org_id == org_id_of(session, org), AgentRow.stable_key == "alpha"
        )
        assert session.scalar(agent) == {**config, "temperature": 0.5}
        schema = session.scalar(select(ToolRow.input_schema).where(ToolRow.id == tool.id))
        assert schema == {"type": "object", "client_secret": planted["schema"]}
        tool_config = select(ToolDeploymentRow.tool_provider_config).where(ToolDeploymentRow.id == sent.id)
        assert session.scalar(tool_config) == {"auth": {"token": planted["tool"]}}
        metadata = select(RegistryArtifactVersionRow.metadata_).where(
            RegistryArtifactVersionRow.id.in_([first.id, second.id])
        )
        assert session.scalars(metadata).all() == [{"apiKey": planted["metadata"]}] * 2
        deployed = select(DeploymentJobAgentRow.config).where(DeploymentJobAgentRow.job_id == job.id)
        assert session.scalar(deployed)["providerConfig"] == {**config, "temperature": 0.5, "seed": 7}


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        (
            "POST",
            "agents",
            {"stableKey": "beta", "provider": "openai", "providerConfig": {"x": {"apiKey": "[redacted]"}}},
            "providerConfig.x.apiKey",
        ),
        ("PATCH", "agents/alpha", {"providerConfig": {"apiKey": "[redacted]"}}, "providerConfig.apiKey"),
        (
            "POST",
            "tools",
            {"name": "T", "toolKey": "t", "inputSchema": {"type": "object", "token": "[redacted]"}},
            "inputSchema.token",
        ),
        (
            "POST",
            "agents/deployments",
            {"agentStableKeys": ["alpha"], "agentProviderConfig": {"password": "[redacted]"}},
            "agentProviderConfig.password",
        ),
    ],
)
def test_a_placeholder_with_no_stored_value_is_400_naming_it(client, http, org, method, path, body, field):
    """Stored, the placeholder would become the credential."""
    environment = client.environments.create("staging").id
    client.agents.create("alpha", "openai", provider_config={"model": "m"})
    client.agents.snapshot("alpha")
    trail = len(client.audit.list(limit=1000).items)
    where = {"environmentId": environment} if path == "agents/deployments" else {}
    response = http.request(method, path, json={"orgSlug": org.slug, **where, **body}, headers=org.headers)
    assert response.status_code == 400, response.text
    assert [detail["field"] for detail in response.json()["details"]] == [field]
    assert len(client.audit.list(limit=1000).items) == trail

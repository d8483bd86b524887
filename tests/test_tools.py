"""Tools (a catalogue with input schemas) and tool deployment records (what runs where, with history)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from api import OrgdeckClient
from api.errors import BadRequest, NotFound
from tests.conftest import count_rows

SEARCH_SCHEMA = {
    "type": "object",
    "properties": {"query": {"type": "string"}, "limit": {"type": "integer", "maximum": 50}},
    "required": ["query"],
}


def test_create_get_list_update_delete(client, http, org):
    created = client.tools.create(
        "Search tickets", "zendesk.search_tickets", description="Find tickets", input_schema=SEARCH_SCHEMA
    )
    assert created.id.startswith("tool_")
    assert created.input_schema == SEARCH_SCHEMA
    plain = client.tools.create("Refund", "stripe.refund")
    assert plain.input_schema == {"type": "object", "properties": {}}
    fetched = http.get(f"tools/{created.id}", headers=org.headers)  # no orgSlug: the key's org
    assert fetched.status_code == 200
    assert set(fetched.json()) == {
        "id",
        "name",
        "toolKey",
        "description",
        "inputSchema",
        "createdAt",
        "updatedAt",
    }
    listing = client.tools.list()
    assert [t.tool_key for t in listing.items] == ["stripe.refund", "zendesk.search_tickets"]
    assert listing.total == 2
    assert [t.name for t in client.tools.list(limit=1, offset=1).items] == ["Search tickets"]
    schema = {**SEARCH_SCHEMA, "required": ["query", "limit"]}
    updated = client.tools.update(created.id, name="Search Zendesk", input_schema=schema)
    assert (updated.name, updated.description, updated.input_schema) == (
        "Search Zendesk",
        "Find tickets",
        schema,
    )
    assert updated.tool_key == created.tool_key
    assert client.tools.delete(created.id).id == created.id
    with pytest.raises(NotFound):
        client.tools.get(created.id)
    assert [t.id for t in client.tools.list().items] == [plain.id]


def test_duplicate_tool_key_is_already_exists(client, db):
    client.tools.create("Refund", "stripe.refund")
    before = count_rows(db, "tools")
    with pytest.raises(BadRequest) as error:
        client.tools.create("Refund again", "stripe.refund")
    assert error.value.code == "already_exists"
    assert error.value.details[0].field == "toolKey"
    assert count_rows(db, "tools") == before


BAD_TOOLS = {
    "missing toolKey": ({"name": "x"}, "toolKey"),
    "uppercase toolKey": ({"name": "x", "toolKey": "Stripe.Refund"}, "toolKey"),
    "toolKey ending in a dot": ({"name": "x", "toolKey": "stripe."}, "toolKey"),
    "empty name": ({"name": " ", "toolKey": "a"}, "name"),
    "schema not an object": ({"name": "x", "toolKey": "a", "inputSchema": ["query"]}, "inputSchema"),
    "schema of a string": ({"name": "x", "toolKey": "a", "inputSchema": {"type": "string"}}, "inputSchema"),
    "schema properties a list": (
        {"name": "x", "toolKey": "a", "inputSchema": {"type": "object", "properties": []}},
        "inputSchema",
    ),
    "schema required not names": (
        {"name": "x", "toolKey": "a", "inputSchema": {"type": "object", "required": [1]}},
        "inputSchema",
    ),
    "schema over 64 KiB": (
        {"name": "x", "toolKey": "a", "inputSchema": {"type": "object", "description": "d" * 65536}},
        "inputSchema",
    ),
    "unknown field": ({"name": "x", "toolKey": "a", "version": "1"}, "version"),
}


@pytest.mark.parametrize("case", list(BAD_TOOLS), ids=list(BAD_TOOLS))
def test_bad_tool_is_400_naming_the_field_and_writes_nothing(http, db, org, case):
    fields, field = BAD_TOOLS[case]
    before = count_rows(db, "tools")
    response = http.post("tools", json={"orgSlug": org.slug, **fields}, headers=org.headers)
    assert response.status_code == 400, response.text
    assert field in response.json()["message"]
    assert count_rows(db, "tools") == before


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"name": None}, "name"),
        ({"toolKey": "other"}, "toolKey"),
        ({"inputSchema": {"type": "array"}}, "inputSchema"),
    ],
)
def test_bad_update_is_400_and_changes_nothing(client, http, org, fields, field):
    tool = client.tools.create("Refund", "stripe.refund")
    response = http.patch(f"tools/{tool.id}", json=fields, headers=org.headers)
    assert response.status_code == 400, response.text
    assert field in response.json()["message"]
    assert client.tools.get(tool.id) == tool


def test_another_orgs_tool_is_not_found_and_untouched(client, server, http, org, other_org):
    with OrgdeckClient(server.url, other_org.key, org_slug=other_org.slug) as other:
        theirs = other.tools.create("Refund", "stripe.refund")
        assert http.get(f"tools/{theirs.id}", headers=org.headers).status_code == 404
        assert http.patch(f"tools/{theirs.id}", json={"name": "mine"}, headers=org.headers).status_code == 404
        assert http.delete(f"tools/{theirs.id}", headers=org.headers).status_code == 404
        assert other.tools.get(theirs.id) == theirs
    assert client.tools.list().total == 0
    assert client.tools.create("Refund", "stripe.refund").tool_key == "stripe.refund"  # keys are per org


def deployment(**overrides: object) -> dict[str, object]:
    fields: dict[str, object] = {
        "tool_name": "Search tickets",
        "tool_key": "zendesk.search_tickets",
        "environment": "production",
        "provider": "openai",
        "tool_id": "tool-abc",
        "version": "1.0.0",
        "hash": "sha256:aaa",
    }
    return fields | overrides


def test_record_creates_then_updates_with_history(client):
    client.environments.create("production")
    first = client.tool_deployments.record(**deployment(tool_provider_config={"timeout": 10}))
    assert first.id.startswith("tdr_")
    assert (first.version, first.history_count, first.history) == ("1.0.0", 0, [])
    assert first.tool_provider_config == {"timeout": 10}
    # The same version and hash again: descriptive fields refresh, no history.
    same = client.tool_deployments.record(**deployment(tool_name="Ticket search"))
    assert (same.id, same.tool_name, same.history_count, same.deployed_at) == (
        first.id,
        "Ticket search",
        0,
        first.deployed_at,
    )
    assert same.tool_provider_config is None
    second = client.tool_deployments.record(
        **deployment(version="1.1.0", hash="sha256:bbb", provider="anthropic")
    )
    third = client.tool_deployments.record(**deployment(version="1.2.0", hash="sha256:ccc"))
    assert third.id == first.id
    assert (third.version, third.hash, third.history_count) == ("1.2.0", "sha256:ccc", 2)
    assert [(h.version, h.hash, h.provider) for h in third.history] == [
        ("1.1.0", "sha256:bbb", "anthropic"),
        ("1.0.0", "sha256:aaa", "openai"),
    ]
    assert third.history[0].deployed_at == second.deployed_at
    assert third.history[0].replaced_at == third.deployed_at
    assert client.tool_deployments.list().total == 1


def test_one_record_per_tool_key_and_environment_and_filters(client):
    for name in ("staging", "production"):
        client.environments.create(name)
    client.tool_deployments.record(**deployment(environment="staging"))
    client.tool_deployments.record(**deployment(environment="production"))
    client.tool_deployments.record(
        **deployment(tool_name="Refund", tool_key="stripe.refund", environment="production", version="3")
    )
    everything = client.tool_deployments.list()
    assert [(r.tool_key, r.environment) for r in everything.items] == [
        ("stripe.refund", "production"),
        ("zendesk.search_tickets", "production"),
        ("zendesk.search_tickets", "staging"),
    ]
    by_name = client.tool_deployments.list(tool_name="Search tickets")
    assert {r.environment for r in by_name.items} == {"staging", "production"}
    in_production = client.tool_deployments.list(environment="production")
    assert {r.tool_key for r in in_production.items} == {"stripe.refund", "zendesk.search_tickets"}
    both = client.tool_deployments.list(tool_name="Refund", environment="staging")
    assert both.items == []
    assert client.tool_deployments.list(tool_key="stripe.refund").total == 1
    assert client.tool_deployments.list(environment="nowhere").total == 0


def test_concurrent_records_make_one_record_and_a_full_history(client):
    client.environments.create("production")
    versions = [f"2.{n}.0" for n in range(8)]

    def record(version: str) -> str:
        return client.tool_deployments.record(**deployment(version=version, hash=f"h-{version}")).id

    with ThreadPoolExecutor(max_workers=8) as pool:
        ids = set(pool.map(record, versions))
    assert len(ids) == 1
    records = client.tool_deployments.list().items
    assert len(records) == 1
    assert records[0].history_count == len(versions) - 1
    seen = {records[0].version} | {h.version for h in records[0].history}
    assert seen == set(versions)


def test_deleting_an_environment_deletes_its_records_and_a_tool_keeps_them(client):
    staging = client.environments.create("staging")
    client.environments.create("production")
    tool = client.tools.create("Search tickets", "zendesk.search_tickets")
    client.tool_deployments.record(**deployment(environment="staging"))
    client.tool_deployments.record(**deployment(environment="production"))
    client.tool_deployments.record(**deployment(environment="production", version="2", hash="h2"))
    client.environments.delete(staging.id)
    client.tools.delete(tool.id)
    remaining = client.tool_deployments.list().items
    assert [(r.environment, r.history_count) for r in remaining] == [("production", 1)]


BAD_RECORDS = {
    "unknown environment": ({"environment": "nowhere"}, "environment"),
    "bad environment name": ({"environment": "Production"}, "environment"),
    "bad toolKey": ({"toolKey": "Not A Key"}, "toolKey"),
    "empty version": ({"version": ""}, "version"),
    "hash too long": ({"hash": "h" * 201}, "hash"),
    "config not an object": ({"toolProviderConfig": "fast"}, "toolProviderConfig"),
    "config over 64 KiB": ({"toolProviderConfig": {"blob": "b" * 65536}}, "toolProviderConfig"),
    "missing provider": ({"provider": None}, "provider"),
    "unknown field": ({"agent": "x"}, "agent"),
}


@pytest.mark.parametrize("case", list(BAD_RECORDS), ids=list(BAD_RECORDS))
def test_bad_record_is_400_naming_the_field_and_writes_nothing(client, http, db, org, case):
    client.environments.create("production")
    fields, field = BAD_RECORDS[case]
    body = {
        "orgSlug": org.slug,
        "toolName": "Search tickets",
        "toolKey": "zendesk.search_tickets",
        "environment": "production",
        "provider": "openai",
        "toolId": "t-1",
        "version": "1",
        "hash": "h",
        **fields,
    }
    before = count_rows(db, "tool_deployment_records")
    response = http.post("agents/tool-deployments", json=body, headers=org.headers)
    assert response.status_code == 400, response.text
    assert any(detail["field"] == field for detail in response.json()["details"])
    assert count_rows(db, "tool_deployment_records") == before


def test_records_are_isolated_between_organizations(client, server, http, org, other_org):
    client.environments.create("production")
    client.tool_deployments.record(**deployment())
    with OrgdeckClient(server.url, other_org.key, org_slug=other_org.slug) as other:
        assert other.tool_deployments.list().total == 0
        # Their own environment names only: ours does not exist for them.
        with pytest.raises(BadRequest) as error:
            other.tool_deployments.record(**deployment())
        assert error.value.details[0].field == "environment"
    query = {"orgSlug": org.slug}
    assert (
        http.get("agents/tool-deployment-records", params=query, headers=other_org.headers).status_code == 403
    )
    body = {"orgSlug": org.slug, "toolName": "x", "toolKey": "x", "environment": "production"}
    body |= {"provider": "openai", "toolId": "t", "version": "1", "hash": "h"}
    assert http.post("agents/tool-deployments", json=body, headers=other_org.headers).status_code == 403
    assert http.post("agents/tool-deployments", json=body, headers=org.headers).status_code == 200

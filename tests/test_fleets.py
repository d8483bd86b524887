"""Fleets: groups of agents with the environments they target; isolation and input rules."""

from __future__ import annotations

from typing import Any

import pytest

from api import OrgdeckClient
from api.errors import BadRequest, NotFound
from tests.conftest import count_rows


@pytest.fixture
def environments(client) -> list[str]:
    return [client.environments.create(name).id for name in ("staging", "production")]


def test_create_returns_the_fleet_with_its_environments(client, environments):
    fleet = client.fleets.create(
        "Support", description="Customer support agents", environment_ids=environments
    )
    assert fleet.id.startswith("fleet_")
    assert fleet.description == "Customer support agents"
    assert [env.name for env in fleet.environments] == ["production", "staging"]  # by name
    assert {env.id for env in fleet.environments} == set(environments)
    assert fleet.agents == []
    assert fleet.agent_count == 0


def test_detail_lists_active_agents_and_the_list_counts_them(client):
    fleet = client.fleets.create("Support")
    client.agents.create("support-triage", "openai", name="Triage", fleet_id=fleet.id)
    client.agents.create("refund-assistant", "anthropic", fleet_id=fleet.id)
    client.agents.create("retired-bot", "openai", fleet_id=fleet.id)
    client.agents.create("loner", "openai")
    client.agents.archive("retired-bot")
    detail = client.fleets.get(fleet.id)
    assert [(a.stable_key, a.name, a.provider) for a in detail.agents] == [
        ("refund-assistant", "refund-assistant", "anthropic"),
        ("support-triage", "Triage", "openai"),
    ]
    assert detail.agent_count == 2
    listed = next(f for f in client.fleets.list().items if f.id == fleet.id)
    assert listed.agent_count == 2


def test_list_is_by_name_and_pages(client):
    for name in ("Ops", "Engineering", "Support"):
        client.fleets.create(name)
    everything = client.fleets.list()
    assert [f.name for f in everything.items] == ["Engineering", "Ops", "Support"]
    assert everything.total == 3
    second_page = client.fleets.list(limit=2, offset=2)
    assert [f.name for f in second_page.items] == ["Support"]
    assert (second_page.limit, second_page.offset, second_page.total) == (2, 2, 3)


def test_update_changes_only_the_fields_sent(client, environments):
    fleet = client.fleets.create("Support", description="old", environment_ids=environments[:1])
    renamed = client.fleets.update(fleet.id, name="Customer care")
    assert (renamed.name, renamed.description) == ("Customer care", "old")
    assert [e.id for e in renamed.environments] == environments[:1]
    moved = client.fleets.update(fleet.id, environment_ids=environments[1:])
    assert [e.id for e in moved.environments] == environments[1:]
    both = client.fleets.update(fleet.id, environment_ids=[*environments, environments[0]])
    assert {e.id for e in both.environments} == set(environments)
    cleared = client.fleets.update(fleet.id, environment_ids=[], description="")
    assert (cleared.environments, cleared.description, cleared.name) == ([], "", "Customer care")


def test_names_are_unique_per_org(client, server, other_org):
    first = client.fleets.create("Support")
    with pytest.raises(BadRequest) as duplicate:
        client.fleets.create("Support")
    assert duplicate.value.code == "already_exists"
    assert duplicate.value.details[0].field == "name"
    other = client.fleets.create("Ops")
    with pytest.raises(BadRequest) as rename:
        client.fleets.update(other.id, name="Support")
    assert rename.value.code == "already_exists"
    assert client.fleets.update(first.id, name="Support").name == "Support"  # its own name is fine
    with OrgdeckClient(server.url, other_org.key, org_slug=other_org.slug) as theirs:
        assert theirs.fleets.create("Support").name == "Support"


def test_delete_keeps_the_agents_outside_any_fleet(client, environments, db):
    fleet = client.fleets.create("Support", environment_ids=environments)
    client.agents.create("support-triage", "openai", fleet_id=fleet.id)
    client.agents.snapshot("support-triage")
    deleted = client.fleets.delete(fleet.id)
    assert deleted.id == fleet.id
    with pytest.raises(NotFound):
        client.fleets.get(fleet.id)
    agent = client.agents.get("support-triage")
    assert agent.fleet_id is None
    assert agent.latest_version == 1
    assert {e.id for e in client.environments.list().items} >= set(environments)
    assert count_rows(db, f"fleet_environments WHERE fleet_id = '{fleet.id}'") == 0


# -- isolation ------------------------------------------------------------------------------------


def test_another_orgs_fleet_is_not_found(client, server, other_org):
    with OrgdeckClient(server.url, other_org.key, org_slug=other_org.slug) as other:
        foreign = other.fleets.create("Theirs")
        other.agents.create("their-agent", "openai", fleet_id=foreign.id)
    with pytest.raises(NotFound):
        client.fleets.get(foreign.id)
    with pytest.raises(NotFound):
        client.fleets.update(foreign.id, name="Mine")
    with pytest.raises(NotFound):
        client.fleets.delete(foreign.id)
    assert foreign.id not in {f.id for f in client.fleets.list().items}
    with OrgdeckClient(server.url, other_org.key, org_slug=other_org.slug) as other:
        untouched = other.fleets.get(foreign.id)
    assert untouched.name == "Theirs"
    assert [a.stable_key for a in untouched.agents] == ["their-agent"]


def test_another_orgs_environments_are_refused(client, server, other_org, db):
    with OrgdeckClient(server.url, other_org.key, org_slug=other_org.slug) as other:
        foreign_env = other.environments.create("production").id
    before = (count_rows(db, "fleets"), count_rows(db, "fleet_environments"))
    with pytest.raises(BadRequest) as error:
        client.fleets.create("Support", environment_ids=[foreign_env])
    assert error.value.details[0].field == "environmentIds"
    assert foreign_env in error.value.message
    assert (count_rows(db, "fleets"), count_rows(db, "fleet_environments")) == before
    fleet = client.fleets.create("Support")
    with pytest.raises(BadRequest):
        client.fleets.update(fleet.id, environment_ids=[foreign_env])
    assert client.fleets.get(fleet.id).environments == []


FLEET_ROUTES = [
    ("POST", "fleets", None, {"name": "x"}),
    ("GET", "fleets", {}, None),
    ("GET", "fleets/{id}", {}, None),
    ("PATCH", "fleets/{id}", None, {"name": "x"}),
    ("DELETE", "fleets/{id}", {}, None),
]


@pytest.mark.parametrize(
    ("method", "path", "query", "body"), FLEET_ROUTES, ids=[f"{r[0]} {r[1]}" for r in FLEET_ROUTES]
)
def test_naming_another_org_is_forbidden_and_changes_nothing(
    http, server, org, other_org, db, method, path, query, body
):
    with OrgdeckClient(server.url, other_org.key, org_slug=other_org.slug) as other:
        theirs = other.fleets.create("Theirs")
    fleets_before = count_rows(db, "fleets")
    params = None if query is None else {"orgSlug": other_org.slug}
    payload = None if body is None else {"orgSlug": other_org.slug, **body}
    response = http.request(
        method, path.format(id=theirs.id), params=params, json=payload, headers=org.headers
    )
    assert response.status_code == 403, response.text
    assert count_rows(db, "fleets") == fleets_before
    with OrgdeckClient(server.url, other_org.key, org_slug=other_org.slug) as other:
        assert other.fleets.get(theirs.id).name == "Theirs"


# -- bad input ------------------------------------------------------------------------------------

BAD_CREATES: list[tuple[str, dict[str, Any]]] = [
    ("name", {"name": ""}),
    ("name", {"name": "   "}),
    ("name", {"name": "n" * 201}),
    ("name", {"name": 5}),
    ("description", {"description": "d" * 2001}),
    ("description", {"description": None}),
    ("environmentIds", {"environmentIds": "env_x"}),
    ("environmentIds", {"environmentIds": [f"env_{i}" for i in range(101)]}),
    ("environmentIds.0", {"environmentIds": [3]}),
    ("environmentIds", {"environmentIds": ["env_doesnotexist"]}),
    ("agents", {"agents": ["support-triage"]}),
]


@pytest.mark.parametrize(
    ("field", "change"), BAD_CREATES, ids=[f"{f}-{i}" for i, (f, _) in enumerate(BAD_CREATES)]
)
def test_bad_create_names_the_field_and_writes_nothing(http, org, db, field, change):
    before = (count_rows(db, "fleets"), count_rows(db, "fleet_environments"))
    body = {"orgSlug": org.slug, "name": "Support", **change}
    response = http.post("fleets", json=body, headers=org.headers)
    assert response.status_code == 400, response.text
    assert field in [detail["field"] for detail in response.json()["details"]]
    assert field.split(".")[0] in response.json()["message"]
    assert (count_rows(db, "fleets"), count_rows(db, "fleet_environments")) == before


BAD_PATCHES: list[tuple[str, dict[str, Any]]] = [
    ("name", {"name": None}),
    ("name", {"name": ""}),
    ("description", {"description": None}),
    ("environmentIds", {"environmentIds": None}),
    ("environmentIds", {"environmentIds": ["env_doesnotexist"]}),
    ("id", {"id": "fleet_other"}),
]


@pytest.mark.parametrize(
    ("field", "change"), BAD_PATCHES, ids=[f"{f}-{i}" for i, (f, _) in enumerate(BAD_PATCHES)]
)
def test_bad_patch_names_the_field_and_changes_nothing(client, http, org, environments, field, change):
    fleet = client.fleets.create("Support", description="kept", environment_ids=environments)
    response = http.patch(f"fleets/{fleet.id}", json={"orgSlug": org.slug, **change}, headers=org.headers)
    assert response.status_code == 400, response.text
    assert field in [detail["field"] for detail in response.json()["details"]]
    assert client.fleets.get(fleet.id) == fleet


def test_bad_paging_names_the_field(http, org):
    for query in ({"limit": "0"}, {"limit": "1001"}, {"offset": "-2"}, {"limit": "ten"}):
        response = http.get("fleets", params={"orgSlug": org.slug, **query}, headers=org.headers)
        assert response.status_code == 400, response.text
        assert response.json()["details"][0]["field"] == next(iter(query))

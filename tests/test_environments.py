"""Environments: create with a target, list with filters and secret counts, update, delete."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from api import OrgdeckClient
from api.errors import BadRequest, NotFound
from tests.conftest import count_rows
from tests.test_deployments import versioned_agent, wait_for_end


def test_create_get_and_list_with_secret_counts(client, http, org):
    production = client.environments.create("production", description="Customer traffic")
    hook = client.environments.create(
        "eu-hook", target="webhook", webhook_url="https://deploy.example.eu/hook"
    )
    client.environments.secrets.set("ZENDESK_TOKEN", "zd-1", environment_id=production.id)
    client.environments.secrets.set("STRIPE_KEY", "sk-1", environment_id=production.id)
    client.environments.secrets.set("OPENAI_API_KEY", "sk-org")  # org-wide: counted nowhere

    assert production.id.startswith("env_")
    assert (production.target, production.webhook_url, production.secret_count) == ("builtin", None, 0)
    assert hook.webhook_url == "https://deploy.example.eu/hook"
    fetched = http.get(f"environments/{production.id}", params={"orgSlug": org.slug}, headers=org.headers)
    assert fetched.status_code == 200
    assert set(fetched.json()) == {
        "id",
        "name",
        "description",
        "target",
        "webhookUrl",
        "verificationWebhookUrl",
        "protected",
        "requiredApprovals",
        "promotesFrom",
        "requirePromotion",
        "soakMinutes",
        "production",
        "secretCount",
        "lastDeployment",
        "signingKeyCreatedAt",
        "createdAt",
        "updatedAt",
    }
    assert fetched.json()["secretCount"] == 2
    assert fetched.json()["lastDeployment"] is None
    assert fetched.json()["signingKeyCreatedAt"] is None
    listing = client.environments.list()
    assert [(e.name, e.secret_count) for e in listing.items] == [("eu-hook", 0), ("production", 2)]
    assert (listing.total, listing.limit, listing.offset) == (2, 50, 0)


def test_list_filters_search_and_pages(client):
    for name in ("dev", "staging", "production", "eu-production"):
        client.environments.create(name, description=f"The {name} cluster")
    client.environments.create("edge", target="webhook", webhook_url="http://10.0.0.5:8080/deploy")
    assert [e.name for e in client.environments.list(target="webhook").items] == ["edge"]
    assert [e.name for e in client.environments.list(search="PRODUCTION").items] == [
        "eu-production",
        "production",
    ]
    assert client.environments.list(search="100%").total == 0  # LIKE wildcards are literal
    page = client.environments.list(limit=2, offset=2)
    assert [e.name for e in page.items] == ["eu-production", "production"]
    assert page.total == 5


def test_duplicate_name_is_already_exists(client, db):
    client.environments.create("staging")
    before = count_rows(db, "environments")
    with pytest.raises(BadRequest) as error:
        client.environments.create("staging")
    assert error.value.code == "already_exists"
    assert error.value.details[0].field == "name"
    assert count_rows(db, "environments") == before


def test_update_renames_and_switches_targets(client):
    environment = client.environments.create("qa")
    client.environments.create("taken")
    hooked = client.environments.update(environment.id, target="webhook", webhook_url="https://ci.example/d")
    assert (hooked.target, hooked.webhook_url) == ("webhook", "https://ci.example/d")
    renamed = client.environments.update(environment.id, name="qa-eu", description="QA in Frankfurt")
    assert (renamed.name, renamed.description, renamed.target) == ("qa-eu", "QA in Frankfurt", "webhook")
    assert renamed.updated_at > environment.updated_at
    back = client.environments.update(environment.id, target="builtin")
    assert (back.target, back.webhook_url) == ("builtin", None)
    with pytest.raises(BadRequest) as needs_url:
        client.environments.update(environment.id, target="webhook")
    assert needs_url.value.details[0].field == "webhookUrl"
    with pytest.raises(BadRequest) as taken:
        client.environments.update(environment.id, name="taken")
    assert taken.value.code == "already_exists"
    assert client.environments.get(environment.id).name == "qa-eu"


def test_delete_removes_the_environment_and_its_secrets(client, db):
    environment = client.environments.create("doomed")
    client.environments.secrets.set("TOKEN", "t-1", environment_id=environment.id)
    kept = client.environments.secrets.set("ORG_TOKEN", "t-2")
    deleted = client.environments.delete(environment.id)
    assert deleted.id == environment.id
    with pytest.raises(NotFound):
        client.environments.get(environment.id)
    assert [s.id for s in client.environments.secrets.list().items] == [kept.id]
    with pytest.raises(NotFound):
        client.environments.delete(environment.id)


def test_list_carries_each_environments_newest_job(client):
    staging = client.environments.create("staging")
    production = client.environments.create("production")
    client.environments.create("idle")
    versioned_agent(client, "alpha")
    wait_for_end(client, client.deployments.deploy(staging.id, ["alpha"]).id)
    first = wait_for_end(client, client.deployments.deploy(production.id, ["alpha"]).id)
    second = wait_for_end(client, client.deployments.deploy(production.id, ["alpha"], model="gpt-4.1").id)

    listed = {e.name: e.last_deployment for e in client.environments.list().items}

    assert listed["idle"] is None
    assert listed["production"] is not None and listed["production"].id == second.id != first.id
    assert (listed["production"].status, listed["production"].finished_at) == ("complete", second.finished_at)
    assert listed["production"].created_at == second.created_at
    assert listed["staging"] is not None and listed["staging"].id not in {first.id, second.id}
    assert client.environments.get(production.id).last_deployment == listed["production"]


def test_delete_is_refused_while_agents_are_deployed_there(client, http, org, db):
    environment = client.environments.create("busy")
    versioned_agent(client, "alpha")
    versioned_agent(client, "beta")
    wait_for_end(client, client.deployments.deploy(environment.id, ["alpha", "beta"]).id)

    response = http.delete(
        f"environments/{environment.id}", params={"orgSlug": org.slug}, headers=org.headers
    )

    assert response.status_code == 400, response.text
    assert response.json()["code"] == "in_use"
    assert "2 agents are deployed" in response.json()["message"]
    assert response.json()["details"][0]["field"] == "environmentId"
    assert client.environments.get(environment.id).id == environment.id
    client.agents.archive("alpha")
    with pytest.raises(BadRequest, match="1 agent is deployed"):
        client.environments.delete(environment.id)
    client.agents.archive("beta")
    assert client.environments.delete(environment.id).id == environment.id
    with db.session() as session:
        for table in ("deployment_jobs", "agent_deployments", "deployment_states"):
            query = text(f"SELECT COUNT(*) FROM {table} WHERE environment_id = :id")  # noqa: S608
            assert session.scalar(query, {"id": environment.id}) == 0, table


BAD_CREATES = {
    "uppercase name": ({"name": "Production"}, "name"),
    "name with space": ({"name": "eu prod"}, "name"),
    "name too long": ({"name": "a" * 64}, "name"),
    "missing name": ({}, "name"),
    "unknown target": ({"name": "x", "target": "kubernetes"}, "target"),
    "webhook without url": ({"name": "x", "target": "webhook"}, "webhookUrl"),
    "builtin with url": ({"name": "x", "webhookUrl": "https://a.example"}, "webhookUrl"),
    "ftp url": ({"name": "x", "target": "webhook", "webhookUrl": "ftp://a.example/x"}, "webhookUrl"),
    "relative url": ({"name": "x", "target": "webhook", "webhookUrl": "/deploy"}, "webhookUrl"),
    "url too long": (
        {"name": "x", "target": "webhook", "webhookUrl": "https://a.example/" + "a" * 2000},
        "webhookUrl",
    ),
    "description too long": ({"name": "x", "description": "d" * 2001}, "description"),
    "wrong type": ({"name": 7}, "name"),
    "unknown field": ({"name": "x", "region": "eu"}, "region"),
}


@pytest.mark.parametrize("case", list(BAD_CREATES), ids=list(BAD_CREATES))
def test_bad_create_is_400_naming_the_field_and_writes_nothing(http, db, org, case):
    fields, field = BAD_CREATES[case]
    before = count_rows(db, "environments")
    response = http.post("environments", json={"orgSlug": org.slug, **fields}, headers=org.headers)
    assert response.status_code == 400, response.text
    assert field in response.json()["message"]
    assert any(detail["field"] == field for detail in response.json()["details"])
    assert count_rows(db, "environments") == before


BAD_UPDATES = {
    "null name": ({"name": None}, "name"),
    "bad name": ({"name": "Not Valid"}, "name"),
    "null target": ({"target": None}, "target"),
    "url on builtin": ({"webhookUrl": "https://a.example"}, "webhookUrl"),
    "unknown field": ({"color": "red"}, "color"),
}


@pytest.mark.parametrize("case", list(BAD_UPDATES), ids=list(BAD_UPDATES))
def test_bad_update_is_400_and_changes_nothing(client, http, org, case):
    environment = client.environments.create("stable", description="unchanged")
    fields, field = BAD_UPDATES[case]
    response = http.patch(
        f"environments/{environment.id}", json={"orgSlug": org.slug, **fields}, headers=org.headers
    )
    assert response.status_code == 400, response.text
    assert field in response.json()["message"]
    assert client.environments.get(environment.id) == environment


def test_list_bounds_are_enforced(http, org):
    for limit in (0, 1001, "many"):
        response = http.post(
            "environments/list", json={"orgSlug": org.slug, "limit": limit}, headers=org.headers
        )
        assert response.status_code == 400
        assert "limit" in response.json()["message"]
    response = http.post("environments/list", json={"orgSlug": org.slug, "offset": -1}, headers=org.headers)
    assert response.status_code == 400


def test_another_orgs_environment_is_not_found_and_untouched(client, server, http, org, other_org):
    with OrgdeckClient(server.url, other_org.key, org_slug=other_org.slug) as other:
        theirs = other.environments.create("production")
        query = {"orgSlug": org.slug}
        assert http.get(f"environments/{theirs.id}", params=query, headers=org.headers).status_code == 404
        patched = http.patch(
            f"environments/{theirs.id}", json={"orgSlug": org.slug, "name": "mine"}, headers=org.headers
        )
        assert patched.status_code == 404
        assert http.delete(f"environments/{theirs.id}", params=query, headers=org.headers).status_code == 404
        assert client.environments.list().total == 0
        assert other.environments.get(theirs.id) == theirs
    # Same names in different organizations do not collide.
    assert client.environments.create("production").name == "production"

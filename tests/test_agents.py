"""Agents: the draft catalogue, immutable numbered versions, isolation between orgs, and input rules."""

from __future__ import annotations

import hashlib
import itertools
import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from api import OrgdeckClient
from api.agents import RESERVED_STABLE_KEYS
from api.errors import BadRequest, NotFound
from service.agents.routes import router as agents_router
from tests.conftest import count_rows

DRAFT = {
    "provider": "openai",
    "name": "Support triage",
    "tags": ["support", "tier-1"],
    "providerConfig": {"model": "gpt-4o-mini", "temperature": 0.2},
    "promptReferences": {"system": "demo/support-prompts/triage-system@production"},
}


def create(http, org, stable_key: str = "support-triage", **fields: Any) -> dict[str, Any]:
    body = {"orgSlug": org.slug, "stableKey": stable_key, **DRAFT, **fields}
    response = http.post("agents", json=body, headers=org.headers)
    assert response.status_code == 200, response.text
    return response.json()


def snapshot(http, org, stable_key: str) -> dict[str, Any]:
    response = http.post(f"agents/{stable_key}/versions", json={"orgSlug": org.slug}, headers=org.headers)
    assert response.status_code == 200, response.text
    return response.json()


def patch(http, org, stable_key: str, **fields: Any) -> dict[str, Any]:
    response = http.patch(f"agents/{stable_key}", json={"orgSlug": org.slug, **fields}, headers=org.headers)
    assert response.status_code == 200, response.text
    return response.json()


def sha256_of(value: Any) -> str:
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


# -- the catalogue --------------------------------------------------------------------------------


def test_create_returns_the_full_record(http, org):
    agent = create(http, org, tags=["tier-1", "support", "support"])
    assert agent["id"].startswith("agent_")
    assert agent["stableKey"] == "support-triage"
    assert agent["tags"] == ["support", "tier-1"]  # a set, sorted
    assert agent["providerConfig"] == DRAFT["providerConfig"]
    assert agent["promptReferences"] == DRAFT["promptReferences"]
    assert agent["fleetId"] is None
    assert agent["latestVersion"] is None
    assert agent["hasUnversionedChanges"] is True
    assert agent["createdAt"].endswith("Z")
    assert agent["archivedAt"] is None
    fetched = http.get("agents/support-triage", params={"orgSlug": org.slug}, headers=org.headers)
    assert fetched.json() == agent


def test_only_stable_key_and_provider_are_required(client):
    agent = client.agents.create("minimal", "anthropic")
    assert agent.name == "minimal"  # the name defaults to the key
    assert agent.tags == []
    assert agent.provider_config == {}
    assert agent.prompt_references == {}


def test_duplicate_stable_key_is_already_exists_even_after_archiving(client, db):
    client.agents.create("kb-answerer", "openai")
    with pytest.raises(BadRequest) as duplicate:
        client.agents.create("kb-answerer", "anthropic")
    assert duplicate.value.code == "already_exists"
    assert duplicate.value.details[0].field == "stableKey"
    client.agents.archive("kb-answerer")
    with pytest.raises(BadRequest) as still_taken:
        client.agents.create("kb-answerer", "openai")
    assert still_taken.value.code == "already_exists"
    assert "archived" in still_taken.value.message


def test_the_same_key_is_free_in_another_org(client, server, other_org):
    client.agents.create("code-reviewer", "openai")
    with OrgdeckClient(server.url, other_org.key, org_slug=other_org.slug) as other:
        assert other.agents.create("code-reviewer", "anthropic").provider == "anthropic"
    assert client.agents.get("code-reviewer").provider == "openai"


def test_patch_changes_only_the_fields_sent(http, org):
    create(http, org)
    changed = patch(http, org, "support-triage", providerConfig={"model": "gpt-4o"}, tags=["vip"])
    assert changed["providerConfig"] == {"model": "gpt-4o"}
    assert changed["tags"] == ["vip"]
    assert changed["name"] == DRAFT["name"]
    assert changed["promptReferences"] == DRAFT["promptReferences"]
    assert changed["updatedAt"] >= changed["createdAt"]


def test_fleet_membership_is_set_changed_and_left(client):
    support = client.fleets.create("Support")
    ops = client.fleets.create("Operations")
    agent = client.agents.create("refund-assistant", "openai", fleet_id=support.id)
    assert agent.fleet_id == support.id
    assert client.agents.update("refund-assistant", fleet_id=ops.id).fleet_id == ops.id
    # Sending other fields leaves the fleet alone; only an explicit null takes the agent out.
    assert client.agents.update("refund-assistant", name="Refunds").fleet_id == ops.id
    assert client.agents.update("refund-assistant", leave_fleet=True).fleet_id is None


def test_archiving_hides_the_agent_and_its_versions(client, http, org):
    client.agents.create("incident-summarizer", "anthropic")
    client.agents.snapshot("incident-summarizer")
    archived = client.agents.archive("incident-summarizer")
    assert archived.archived_at is not None
    assert "incident-summarizer" not in {a.stable_key for a in client.agents.list().items}
    params = {"orgSlug": org.slug}
    for method, path in [
        ("GET", "agents/incident-summarizer"),
        ("GET", "agents/incident-summarizer/versions"),
        ("GET", "agents/incident-summarizer/versions/1"),
        ("DELETE", "agents/incident-summarizer"),
    ]:
        assert http.request(method, path, params=params, headers=org.headers).status_code == 404
    for method, path in [
        ("PATCH", "agents/incident-summarizer"),
        ("POST", "agents/incident-summarizer/versions"),
    ]:
        response = http.request(method, path, json={"orgSlug": org.slug}, headers=org.headers)
        assert response.status_code == 404


# -- versions -------------------------------------------------------------------------------------


def test_versions_are_numbered_hashed_and_frozen(http, org):
    create(http, org)
    first = snapshot(http, org, "support-triage")
    assert first["version"] == 1
    assert first["stableKey"] == "support-triage"
    assert first["snapshot"] == {
        "name": DRAFT["name"],
        "provider": DRAFT["provider"],
        "providerConfig": DRAFT["providerConfig"],
        "promptReferences": DRAFT["promptReferences"],
    }
    assert first["contentHash"] == sha256_of(first["snapshot"])
    agent = http.get("agents/support-triage", params={"orgSlug": org.slug}, headers=org.headers).json()
    assert agent["latestVersion"] == 1
    assert agent["draftHash"] == first["contentHash"]
    assert agent["hasUnversionedChanges"] is False

    edited = patch(http, org, "support-triage", providerConfig={"model": "gpt-4o", "temperature": 0})
    assert edited["hasUnversionedChanges"] is True
    second = snapshot(http, org, "support-triage")
    assert second["version"] == 2
    assert second["snapshot"]["providerConfig"] == {"model": "gpt-4o", "temperature": 0}
    assert second["contentHash"] != first["contentHash"]

    again = http.get("agents/support-triage/versions/1", params={"orgSlug": org.slug}, headers=org.headers)
    assert again.json() == first  # the draft moved on; version 1 did not
    listing = http.get("agents/support-triage/versions", params={"orgSlug": org.slug}, headers=org.headers)
    assert [v["version"] for v in listing.json()["items"]] == [2, 1]
    assert listing.json()["total"] == 2


def test_an_unchanged_draft_returns_the_newest_version(client, db):
    client.agents.create("kb-answerer", "openai", provider_config={"model": "gpt-4o"})
    first = client.agents.snapshot("kb-answerer")
    before = count_rows(db, "agent_versions")
    assert client.agents.snapshot("kb-answerer") == first
    # Writing the same values back is no change either, nor are tags and fleet (catalogue data).
    client.agents.update("kb-answerer", provider_config={"model": "gpt-4o"}, tags=["new-tag"])
    assert client.agents.snapshot("kb-answerer") == first
    assert count_rows(db, "agent_versions") == before
    # Back and forth: a draft equal to an older version (not the newest) is a new version.
    client.agents.update("kb-answerer", provider_config={"model": "gpt-4.1"})
    assert client.agents.snapshot("kb-answerer").version == 2
    client.agents.update("kb-answerer", provider_config={"model": "gpt-4o"})
    third = client.agents.snapshot("kb-answerer")
    assert third.version == 3
    assert third.content_hash == first.content_hash


def test_no_route_changes_or_deletes_a_version(http, org):
    create(http, org)
    frozen = snapshot(http, org, "support-triage")
    path = "agents/support-triage/versions/1"
    for method in ("PUT", "PATCH", "DELETE", "POST"):
        response = http.request(
            method,
            path,
            params={"orgSlug": org.slug},
            json={"orgSlug": org.slug, "snapshot": {}},
            headers=org.headers,
        )
        assert response.status_code == 405, (method, response.text)
    for method in ("PUT", "DELETE", "PATCH"):
        response = http.request(
            method, "agents/support-triage/versions", params={"orgSlug": org.slug}, headers=org.headers
        )
        assert response.status_code == 405, (method, response.text)
    assert http.get(path, params={"orgSlug": org.slug}, headers=org.headers).json() == frozen


def test_concurrent_snapshots_number_without_gaps_or_duplicates(server, org):
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as setup:
        setup.agents.create("busy-agent", "openai")

    def edit_and_snapshot(worker: int) -> list[tuple[int, str]]:
        made = []
        with OrgdeckClient(server.url, org.key, org_slug=org.slug, max_retries=0) as client:
            for step in range(4):
                client.agents.update("busy-agent", provider_config={"worker": worker, "step": step})
                version = client.agents.snapshot("busy-agent")
                made.append((version.version, version.content_hash))
        return made

    with ThreadPoolExecutor(max_workers=6) as pool:
        answers = [pair for made in pool.map(edit_and_snapshot, range(6)) for pair in made]

    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as client:
        stored = client.agents.versions("busy-agent", limit=1000).items
    numbers = sorted(v.version for v in stored)
    assert numbers == list(range(1, len(stored) + 1))  # 1, 2, 3… with no gap and no repeat
    by_number = {v.version: v.content_hash for v in stored}
    assert all(by_number[number] == digest for number, digest in answers)  # every answer is what is stored
    hashes_in_order = [by_number[n] for n in numbers]
    assert all(a != b for a, b in itertools.pairwise(hashes_in_order))


def test_concurrent_snapshots_of_one_draft_make_one_version(server, org, db):
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as setup:
        setup.agents.create("steady-agent", "anthropic")

    def snap(_: int) -> int:
        with OrgdeckClient(server.url, org.key, org_slug=org.slug, max_retries=0) as client:
            return client.agents.snapshot("steady-agent").version

    with ThreadPoolExecutor(max_workers=8) as pool:
        assert set(pool.map(snap, range(16))) == {1}
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as client:
        assert client.agents.versions("steady-agent").total == 1


def test_numbering_is_per_agent(client):
    for key in ("agent-a", "agent-b"):
        client.agents.create(key, "openai")
    client.agents.snapshot("agent-a")
    client.agents.update("agent-a", name="A, edited")
    assert client.agents.snapshot("agent-a").version == 2
    assert client.agents.snapshot("agent-b").version == 1


# -- listing --------------------------------------------------------------------------------------


@pytest.fixture
def catalogue(client):
    support = client.fleets.create("Support")
    client.agents.create(
        "support-triage", "openai", name="Support Triage", tags=["support", "tier-1"], fleet_id=support.id
    )
    client.agents.create(
        "refund-assistant",
        "anthropic",
        name="Refund helper",
        tags=["support", "payments"],
        fleet_id=support.id,
    )
    client.agents.create("code-reviewer", "anthropic", tags=["engineering"])
    client.agents.create("kb_answerer", "openai", name="KB 100% coverage", tags=["support"])
    return support


def keys(page) -> list[str]:
    return [agent.stable_key for agent in page.items]


def test_list_orders_by_key_and_counts(client, catalogue):
    page = client.agents.list()
    assert keys(page) == ["code-reviewer", "kb_answerer", "refund-assistant", "support-triage"]
    assert (page.total, page.limit, page.offset) == (4, 50, 0)


def test_list_filters_combine(client, catalogue):
    assert keys(client.agents.list(tags=["support"])) == ["kb_answerer", "refund-assistant", "support-triage"]
    assert keys(client.agents.list(tags=["support", "payments"])) == ["refund-assistant"]  # all must match
    assert keys(client.agents.list(tags=["support", "engineering"])) == []
    assert keys(client.agents.list(fleet_id=catalogue.id)) == ["refund-assistant", "support-triage"]
    assert keys(client.agents.list(provider="anthropic")) == ["code-reviewer", "refund-assistant"]
    assert keys(client.agents.list(provider="anthropic", tags=["support"])) == ["refund-assistant"]
    assert keys(client.agents.list(search="TRIAGE")) == ["support-triage"]  # key or name, any case
    assert keys(client.agents.list(search="helper")) == ["refund-assistant"]
    assert keys(client.agents.list(search="100%")) == ["kb_answerer"]
    assert keys(client.agents.list(search="%")) == ["kb_answerer"]  # % and _ are literal, not wildcards
    assert keys(client.agents.list(search="_")) == ["kb_answerer"]
    assert keys(client.agents.list(search="t_i")) == []
    assert client.agents.list(fleet_id="fleet_unknown").total == 0


def test_list_pages(client, catalogue):
    first = client.agents.list(limit=3)
    second = client.agents.list(limit=3, offset=3)
    assert keys(first) + keys(second) == keys(client.agents.list())
    assert (first.total, second.total, len(second.items)) == (4, 4, 1)
    assert client.agents.list(offset=10).items == []


# -- routing --------------------------------------------------------------------------------------


def _agent_route_matching(path: str, method: str) -> str | None:
    from starlette.routing import Match

    scope = {"type": "http", "path": "/api/agents" + path, "method": method}
    for route in agents_router.routes:
        match, _ = route.matches(scope)
        if match == Match.FULL:
            return route.path_format
    return None


@pytest.mark.parametrize("word", sorted(RESERVED_STABLE_KEYS))
def test_agent_paths_never_shadow_the_fixed_words(word, http, org):
    # Whatever order routers are registered in, /agents/{stableKey} never takes these paths.
    assert _agent_route_matching(f"/{word}", "GET") is None
    assert _agent_route_matching(f"/{word}", "DELETE") is None
    assert _agent_route_matching(f"/{word}/versions", "GET") is None
    assert _agent_route_matching(f"/{word}-bot", "GET") == "/api/agents/{stableKey}"
    response = http.get(f"agents/{word}", params={"orgSlug": org.slug}, headers=org.headers)
    assert "No agent" not in response.text
    refused = http.post(
        "agents", json={"orgSlug": org.slug, "stableKey": word, "provider": "openai"}, headers=org.headers
    )
    assert refused.status_code == 400
    assert refused.json()["details"][0]["field"] == "stableKey"
    assert "reserved" in refused.json()["message"]


def test_tool_deployment_records_are_not_taken_for_an_agent(http, org):
    response = http.get("agents/tool-deployment-records", params={"orgSlug": org.slug}, headers=org.headers)
    assert response.status_code == 200, response.text
    assert "items" in response.json()


# -- isolation ------------------------------------------------------------------------------------


def test_another_orgs_agent_is_not_found(client, server, other_org, http, org):
    with OrgdeckClient(server.url, other_org.key, org_slug=other_org.slug) as other:
        other.agents.create("their-agent", "openai")
        other.agents.snapshot("their-agent")
    with pytest.raises(NotFound):
        client.agents.get("their-agent")
    with pytest.raises(NotFound):
        client.agents.update("their-agent", name="mine now")
    with pytest.raises(NotFound):
        client.agents.snapshot("their-agent")
    with pytest.raises(NotFound):
        client.agents.versions("their-agent")
    with pytest.raises(NotFound):
        client.agents.version("their-agent", 1)
    with pytest.raises(NotFound):
        client.agents.archive("their-agent")
    assert client.agents.list(search="their").total == 0
    with OrgdeckClient(server.url, other_org.key, org_slug=other_org.slug) as other:
        untouched = other.agents.get("their-agent")
    assert untouched.name == "their-agent"
    assert untouched.archived_at is None


def test_another_orgs_fleet_cannot_be_joined(client, server, other_org, db):
    with OrgdeckClient(server.url, other_org.key, org_slug=other_org.slug) as other:
        foreign = other.fleets.create("Theirs")
    before = count_rows(db, "agents")
    with pytest.raises(BadRequest) as error:
        client.agents.create("sneaky", "openai", fleet_id=foreign.id)
    assert error.value.details[0].field == "fleetId"
    assert count_rows(db, "agents") == before
    client.agents.create("honest", "openai")
    with pytest.raises(BadRequest) as patched:
        client.agents.update("honest", fleet_id=foreign.id)
    assert patched.value.details[0].field == "fleetId"
    assert client.agents.get("honest").fleet_id is None


AGENT_ROUTES = [
    ("POST", "agents", None, {"stableKey": "x", "provider": "openai"}),
    ("POST", "agents/list", None, {}),
    ("GET", "agents/support-triage", {}, None),
    ("PATCH", "agents/support-triage", None, {"name": "x"}),
    ("DELETE", "agents/support-triage", {}, None),
    ("POST", "agents/support-triage/versions", None, {}),
    ("GET", "agents/support-triage/versions", {}, None),
    ("GET", "agents/support-triage/versions/1", {}, None),
]


@pytest.mark.parametrize(
    ("method", "path", "query", "body"), AGENT_ROUTES, ids=[f"{r[0]} {r[1]}" for r in AGENT_ROUTES]
)
def test_naming_another_org_is_forbidden_and_changes_nothing(http, org, other_org, method, path, query, body):
    create(http, other_org)
    snapshot(http, other_org, "support-triage")
    params = None if query is None else {"orgSlug": other_org.slug}
    payload = None if body is None else {"orgSlug": other_org.slug, **body}
    response = http.request(method, path, params=params, json=payload, headers=org.headers)
    assert response.status_code == 403, response.text
    assert response.json()["code"] == "forbidden"
    theirs = http.get("agents/support-triage", params={"orgSlug": other_org.slug}, headers=other_org.headers)
    assert theirs.json()["name"] == DRAFT["name"]
    assert theirs.json()["latestVersion"] == 1


# -- bad input ------------------------------------------------------------------------------------

BAD_CREATES = [
    ("stableKey", {"stableKey": "Support Triage"}),
    ("stableKey", {"stableKey": ""}),
    ("stableKey", {"stableKey": "-leading-dash"}),
    ("stableKey", {"stableKey": "k" * 101}),
    ("stableKey", {"stableKey": 42}),
    ("provider", {"provider": ""}),
    ("provider", {"provider": ["openai"]}),
    ("name", {"name": ""}),
    ("name", {"name": "n" * 201}),
    ("tags", {"tags": "support"}),
    ("tags", {"tags": [f"t{i}" for i in range(33)]}),
    ("tags.0", {"tags": ["t" * 65]}),
    ("tags.1", {"tags": ["ok", "Not OK"]}),
    ("providerConfig", {"providerConfig": ["model"]}),
    ("providerConfig", {"providerConfig": {"blob": "x" * (64 * 1024)}}),
    ("promptReferences.system", {"promptReferences": {"system": 7}}),
    ("promptReferences.system", {"promptReferences": {"system": ""}}),
    ("promptReferences.system", {"promptReferences": {"system": "r" * 501}}),
    ("promptReferences", {"promptReferences": {f"p{i}": "demo/r/a@1" for i in range(51)}}),
    ("promptReferences", {"promptReferences": ["demo/r/a@1"]}),
    ("fleetId", {"fleetId": "fleet_doesnotexist"}),
    ("fleetId", {"fleetId": 12}),
    ("colour", {"colour": "blue"}),
    ("orgSlug", {"orgSlug": None}),
]


@pytest.mark.parametrize(
    ("field", "change"), BAD_CREATES, ids=[f"{f}-{i}" for i, (f, _) in enumerate(BAD_CREATES)]
)
def test_bad_create_names_the_field_and_writes_nothing(http, org, db, field, change):
    before = (count_rows(db, "agents"), count_rows(db, "agent_tags"))
    body = {"orgSlug": org.slug, "stableKey": "support-triage", **DRAFT, **change}
    response = http.post("agents", json=body, headers=org.headers)
    assert response.status_code == 400, response.text
    fields = [detail["field"] for detail in response.json()["details"]]
    assert any(f == field or f.startswith(field + ".") for f in fields), fields
    assert field.split(".")[0] in response.json()["message"]
    assert (count_rows(db, "agents"), count_rows(db, "agent_tags")) == before


BAD_PATCHES = [
    ("name", {"name": None}),
    ("tags", {"tags": None}),
    ("providerConfig", {"providerConfig": None}),
    ("providerConfig", {"providerConfig": {"blob": "x" * (64 * 1024)}}),
    ("provider", {"provider": "Open AI"}),
    ("tags", {"tags": [f"t{i}" for i in range(33)]}),
    ("promptReferences.system", {"promptReferences": {"system": None}}),
    ("fleetId", {"fleetId": "fleet_doesnotexist"}),
    ("stableKey", {"stableKey": "renamed"}),
    ("version", {"version": 3}),
]


@pytest.mark.parametrize(
    ("field", "change"), BAD_PATCHES, ids=[f"{f}-{i}" for i, (f, _) in enumerate(BAD_PATCHES)]
)
def test_bad_patch_names_the_field_and_changes_nothing(http, org, db, field, change):
    before = create(http, org, tags=["support"])
    tag_rows = count_rows(db, "agent_tags")
    response = http.patch("agents/support-triage", json={"orgSlug": org.slug, **change}, headers=org.headers)
    assert response.status_code == 400, response.text
    assert field in [detail["field"] for detail in response.json()["details"]]
    after = http.get("agents/support-triage", params={"orgSlug": org.slug}, headers=org.headers).json()
    assert after == before
    assert count_rows(db, "agent_tags") == tag_rows


BAD_LISTS = [
    ("limit", {"limit": 0}),
    ("limit", {"limit": 1001}),
    ("limit", {"limit": "many"}),
    ("offset", {"offset": -1}),
    ("tags", {"tags": "support"}),
    ("tags.0", {"tags": ["BAD TAG"]}),
    ("search", {"search": "s" * 201}),
    ("provider", {"provider": 3}),
    ("sort", {"sort": "name"}),
]


@pytest.mark.parametrize(
    ("field", "change"), BAD_LISTS, ids=[f"{f}-{i}" for i, (f, _) in enumerate(BAD_LISTS)]
)
def test_bad_list_names_the_field(http, org, field, change):
    response = http.post("agents/list", json={"orgSlug": org.slug, **change}, headers=org.headers)
    assert response.status_code == 400, response.text
    assert field in [detail["field"] for detail in response.json()["details"]]


def test_bad_version_requests_name_the_field(http, org, db):
    create(http, org)
    params = {"orgSlug": org.slug}
    for version in ("latest", "0", "-1"):
        response = http.get(f"agents/support-triage/versions/{version}", params=params, headers=org.headers)
        assert response.status_code == 400, response.text
        assert response.json()["details"][0]["field"] == "version"
    for query in ({"limit": "0"}, {"limit": "1001"}, {"offset": "-1"}):
        response = http.get("agents/support-triage/versions", params={**params, **query}, headers=org.headers)
        assert response.status_code == 400, response.text
        assert response.json()["details"][0]["field"] == next(iter(query))
    missing = http.get("agents/support-triage/versions/7", params=params, headers=org.headers)
    assert missing.status_code == 404
    before = count_rows(db, "agent_versions")
    extra = http.post(
        "agents/support-triage/versions", json={"orgSlug": org.slug, "note": "x"}, headers=org.headers
    )
    assert extra.status_code == 400
    assert extra.json()["details"][0]["field"] == "note"
    not_json = http.post(
        "agents/support-triage/versions",
        content=b"{",
        headers={**org.headers, "Content-Type": "application/json"},
    )
    assert not_json.status_code == 400
    assert count_rows(db, "agent_versions") == before


# -- demo data ------------------------------------------------------------------------------------


def test_demo_seed_is_realistic_and_idempotent(client, db):
    from service.agents.demo import DEMO_AGENTS, DEMO_FLEETS, seed_agents

    seed_agents(client)
    counts = {table: count_rows(db, table) for table in ("agents", "agent_versions", "agent_tags", "fleets")}
    seed_agents(client)
    assert {table: count_rows(db, table) for table in counts} == counts
    agents = client.agents.list(limit=1000).items
    assert len(agents) == len(DEMO_AGENTS) >= 12
    assert {f.name for f in client.fleets.list().items} == set(DEMO_FLEETS)
    assert {a.provider for a in agents} == {"openai", "anthropic"}
    assert sum(a.latest_version >= 2 for a in agents) >= 8  # most agents have a history
    assert any(a.has_unversioned_changes for a in agents)
    triage = client.agents.get("support-triage")
    assert triage.prompt_references["system"] == "demo/support-prompts/triage-system@production"
    first = client.agents.version("support-triage", 1).snapshot.provider_config
    assert first != triage.provider_config

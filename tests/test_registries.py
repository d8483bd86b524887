"""Prompt registries: immutable versions, numbering, labels, soft delete and restore, bad input."""

from __future__ import annotations

import hashlib
import json
import uuid

import pytest
from sqlalchemy import text

from api.errors import BadRequest, NotFound
from api.registries import MAX_CONTENT_BYTES, ChatMessage
from tests.conftest import count_rows

REGISTRY_TABLES = (
    "registries",
    "registry_artifacts",
    "registry_artifact_versions",
    "registry_artifact_labels",
)


@pytest.fixture
def ref(client) -> str:
    return client.registries.create(f"prompts-{uuid.uuid4().hex[:8]}").registry_ref


def table_counts(db) -> dict[str, int]:
    return {table: count_rows(db, table) for table in REGISTRY_TABLES}


def test_create_returns_the_registry_ref_and_lists_with_counts(client, org):
    created = client.registries.create("support", visibility="public", description="Support prompts")
    assert created.registry_ref == f"{org.slug}/support"
    assert created.id.startswith("reg_")
    assert (created.visibility, created.artifact_count, created.version_count) == ("public", 0, 0)
    client.registries.publish(created.registry_ref, "a", "one")
    client.registries.publish(created.registry_ref, "a", "two")
    client.registries.publish(created.registry_ref, "b", "three")
    client.registries.create("empty")
    listing = client.registries.list()
    assert [r.name for r in listing.items] == ["empty", "support"]
    support = listing.items[1]
    assert (support.artifact_count, support.version_count, support.description) == (2, 3, "Support prompts")
    assert client.registries.create("other").visibility == "private"


def test_duplicate_registry_name_is_already_exists(client):
    client.registries.create("dup")
    with pytest.raises(BadRequest) as error:
        client.registries.create("dup")
    assert error.value.code == "already_exists"
    assert error.value.details[0].field == "name"


def test_publish_numbers_versions_and_returns_hash_and_variables(client, ref):
    first = client.registries.publish(
        ref,
        "triage",
        "Hello {{ customer }}, about {{ticket.id}} and {{customer}} again",
        metadata={"model": "gpt-x"},
        commit_message="first draft",
    )
    assert (first.version, first.number, first.created, first.content_type) == ("1", 1, True, "text")
    assert first.variables == ["customer", "ticket.id"]
    canonical = json.dumps(first.content, ensure_ascii=False, separators=(",", ":"))
    assert first.content_hash == "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()
    assert (first.metadata, first.commit_message) == ({"model": "gpt-x"}, "first draft")
    second = client.registries.publish(ref, "triage", [ChatMessage(role="system", content="Be {{tone}}")])
    assert (second.version, second.number, second.content_type) == ("2", 2, "chat")
    assert second.content == [ChatMessage(role="system", content="Be {{tone}}")]
    assert second.variables == ["tone"]
    semver = client.registries.publish(ref, "triage", "Release", version="1.0.0-rc.1+build.5")
    assert (semver.version, semver.number) == ("1.0.0-rc.1+build.5", 3)


def test_republishing_the_same_content_is_a_no_op(client, ref, db):
    first = client.registries.publish(ref, "p", "same", version="1.0.0")
    before = table_counts(db)
    again = client.registries.publish(ref, "p", "same", version="1.0.0", metadata={"ignored": True})
    assert again.created is False
    assert again.model_dump(exclude={"created", "labels"}) == first.model_dump(exclude={"created", "labels"})
    auto = client.registries.publish(ref, "p", "same")  # equal to the newest version: that version
    assert (auto.created, auto.version) == (False, "1.0.0")
    assert table_counts(db) == before


def test_no_request_can_change_a_published_version(client, ref, http, org):
    client.registries.publish(ref, "p", "original", version="2.0.0")
    with pytest.raises(BadRequest) as error:
        client.registries.publish(ref, "p", "changed", version="2.0.0")
    assert error.value.code == "version_exists"
    assert error.value.details[0].field == "version"
    attempts = [
        (
            "PUT",
            "registries/artifacts",
            {"registryRef": ref, "name": "p", "version": "2.0.0", "content": "x"},
        ),
        (
            "PATCH",
            "registries/artifacts",
            {"registryRef": ref, "name": "p", "version": "2.0.0", "content": "x"},
        ),
        (
            "POST",
            "registries/artifacts/labels",
            {"registryRef": ref, "name": "p", "label": "x", "version": "2.0.0", "content": "x"},
        ),
        ("DELETE", "registries/artifacts", None),
    ]
    for method, path, body in attempts:
        response = http.request(method, path, json=body, params={"registryRef": ref}, headers=org.headers)
        assert response.status_code in {400, 405}, (method, path, response.text)
    # Publishing other content without a version makes a new version; 2.0.0 stays as it was.
    client.registries.publish(ref, "p", "changed")
    assert client.registries.retrieve(ref, "p", version="2.0.0").content == "original"


def test_latest_follows_the_newest_version_and_labels_move(client, ref):
    client.registries.publish(ref, "p", "v1", labels=["production", "staging"])
    client.registries.publish(ref, "p", "v2")
    assert client.registries.retrieve(ref, "p", label="latest").content == "v2"
    assert client.registries.retrieve(ref, "p").content == "v1"  # production wins over latest
    moved = client.registries.move_label(ref, "p", "production", "2")
    assert moved.version == "2"
    assert moved.labels == ["latest", "production"]
    assert client.registries.retrieve(ref, "p").content == "v2"
    versions = client.registries.versions(ref, "p").items
    assert [(v.version, v.labels) for v in versions] == [("2", ["latest", "production"]), ("1", ["staging"])]
    artifact = client.registries.artifacts(ref).items[0]
    assert artifact.labels == {"latest": "2", "production": "2", "staging": "1"}
    assert (artifact.latest_version, artifact.version_count) == ("2", 2)
    client.registries.publish(ref, "p", "v3", labels=["staging"])
    labels = client.registries.artifacts(ref).items[0].labels
    assert labels == {"latest": "3", "production": "2", "staging": "3"}


def test_without_production_retrieve_returns_latest(client, ref):
    client.registries.publish(ref, "p", "v1")
    client.registries.publish(ref, "p", "v2")
    retrieved = client.registries.retrieve(ref, "p")
    assert (retrieved.content, retrieved.label) == ("v2", "latest")
    assert client.registries.retrieve(ref, "p", version="1").label is None


def test_latest_cannot_be_moved_or_given(client, ref, db):
    client.registries.publish(ref, "p", "v1")
    client.registries.publish(ref, "p", "v2")
    with pytest.raises(BadRequest) as moved:
        client.registries.move_label(ref, "p", "latest", "1")
    assert moved.value.details[0].field == "label"
    before = table_counts(db)
    with pytest.raises(BadRequest) as given:
        client.registries.publish(ref, "p", "v3", labels=["latest"])
    assert given.value.details[0].field == "labels"
    assert table_counts(db) == before


def test_unknown_names_are_not_found(client, ref):
    client.registries.publish(ref, "p", "v1")
    with pytest.raises(NotFound) as no_version:
        client.registries.retrieve(ref, "p", version="7")
    assert no_version.value.details[0].field == "version"
    with pytest.raises(NotFound) as no_artifact:
        client.registries.retrieve(ref, "nope")
    assert no_artifact.value.details[0].field == "name"
    with pytest.raises(NotFound):
        client.registries.move_label(ref, "p", "production", "9.9.9")
    with pytest.raises(NotFound) as no_registry:
        client.registries.artifacts(ref + "-missing")
    assert no_registry.value.details[0].field == "registryRef"


def test_soft_delete_hides_and_restore_brings_back_every_row(client, ref, db):
    client.registries.publish(ref, "p", "v1", labels=["production"])
    client.registries.publish(ref, "q", [{"role": "user", "content": "hi"}])
    before = table_counts(db)
    deleted = client.registries.delete(ref)
    assert deleted.deleted_at is not None
    for read in (
        lambda: client.registries.artifacts(ref),
        lambda: client.registries.versions(ref, "p"),
        lambda: client.registries.retrieve(ref, "p"),
        lambda: client.registries.publish(ref, "p", "v2"),
        lambda: client.registries.move_label(ref, "p", "staging", "1"),
        lambda: client.registries.delete(ref),
    ):
        with pytest.raises(NotFound):
            read()
    assert table_counts(db) == before  # nothing erased
    assert ref not in {r.registry_ref for r in client.registries.list().items}
    listed = {r.registry_ref: r for r in client.registries.list(include_deleted=True).items}
    assert listed[ref].deleted_at is not None
    restored = client.registries.restore(ref)
    assert restored.deleted_at is None
    assert (restored.artifact_count, restored.version_count) == (2, 2)
    assert client.registries.retrieve(ref, "p").content == "v1"
    assert table_counts(db) == before


def test_a_deleted_registrys_name_is_not_silently_reused(client, ref):
    name = ref.split("/")[1]
    client.registries.publish(ref, "p", "kept")
    client.registries.delete(ref)
    with pytest.raises(BadRequest) as error:
        client.registries.create(name)
    assert error.value.code == "already_exists"
    assert "restore" in error.value.message
    client.registries.restore(ref)
    assert client.registries.retrieve(ref, "p").content == "kept"


def test_restore_of_a_live_registry_changes_nothing(client, ref):
    assert client.registries.restore(ref).deleted_at is None


def test_listing_pages(client, ref):
    for index in range(5):
        client.registries.publish(ref, f"a{index}", "x")
        client.registries.publish(ref, "many", f"v{index}")
    page = client.registries.artifacts(ref, limit=2, offset=1)
    assert ([a.name for a in page.items], page.total) == (["a1", "a2"], 6)
    versions = client.registries.versions(ref, "many", limit=2, offset=1)
    assert ([v.version for v in versions.items], versions.total) == (["4", "3"], 5)


BAD_PUBLISHES = {
    "oversized content": ({"content": "x" * (MAX_CONTENT_BYTES + 1)}, "content"),
    "oversized chat": (
        {"content": [{"role": "user", "content": "x" * (MAX_CONTENT_BYTES // 2 + 1)}] * 2},
        "content",
    ),
    "empty content": ({"content": ""}, "content"),
    "content of the wrong shape": ({"content": {"text": "hi"}}, "content"),
    "unknown chat role": ({"content": [{"role": "robot", "content": "hi"}]}, "content.chat.0.role"),
    "unknown chat field": (
        {"content": [{"role": "user", "content": "hi", "mood": "x"}]},
        "content.chat.0.mood",
    ),
    "bad semver": ({"version": "1.2"}, "version"),
    "leading zero semver": ({"version": "01.2.3"}, "version"),
    "integer version": ({"version": "3"}, "version"),
    "bad label": ({"labels": ["Production!"]}, "labels.0"),
    "reserved label": ({"labels": ["latest"]}, "labels"),
    "bad artifact name": ({"name": "Has Spaces"}, "name"),
    "bad registry ref": ({"registryRef": "no-slash"}, "registryRef"),
    "unknown field": ({"colour": "red"}, "colour"),
    "metadata not an object": ({"metadata": ["x"]}, "metadata"),
}


@pytest.mark.parametrize("case", list(BAD_PUBLISHES), ids=list(BAD_PUBLISHES))
def test_bad_publish_is_400_naming_the_field_and_writes_nothing(http, org, db, ref, case):
    changes, field = BAD_PUBLISHES[case]
    body = {"registryRef": ref, "name": "p", "content": "fine", **changes}
    before = table_counts(db)
    response = http.post("registries/artifacts", json=body, headers=org.headers)
    assert response.status_code == 400, response.text
    assert any(detail["field"] == field for detail in response.json()["details"]), response.json()
    assert field in response.json()["message"]
    assert table_counts(db) == before


def test_content_at_the_limit_is_accepted(client, ref):
    published = client.registries.publish(ref, "big", "é" * (MAX_CONTENT_BYTES // 2))
    assert client.registries.retrieve(ref, "big", version=published.version).content == published.content


BAD_RETRIEVES = {
    "unknown label": ({"label": "canary"}, "label"),
    "malformed label": ({"label": "Not A Label"}, "label"),
    "bad version": ({"version": "1.x"}, "version"),
    "version and label": ({"version": "1", "label": "production"}, "label"),
    "bad registry ref": ({"registryRef": "a/b/c"}, "registryRef"),
    "limit out of range": ({"limit": "0"}, "limit"),
}


@pytest.mark.parametrize("case", list(BAD_RETRIEVES), ids=list(BAD_RETRIEVES))
def test_bad_retrieve_is_400_naming_the_field(client, http, org, ref, case):
    client.registries.publish(ref, "p", "v1")
    changes, field = BAD_RETRIEVES[case]
    path = "registries/artifacts" if "limit" in changes else "registries/artifacts/retrieve"
    params = {"registryRef": ref, "name": "p", **changes}
    response = http.get(path, params=params, headers=org.headers)
    assert response.status_code == 400, response.text
    assert any(detail["field"] == field for detail in response.json()["details"]), response.json()


def test_bad_create_and_move_label_name_the_field(http, org, ref):
    bad_name = http.post("registries", json={"orgSlug": org.slug, "name": "Bad Name"}, headers=org.headers)
    assert bad_name.status_code == 400
    assert bad_name.json()["details"][0]["field"] == "name"
    bad_visibility = http.post(
        "registries", json={"orgSlug": org.slug, "name": "x", "visibility": "secret"}, headers=org.headers
    )
    assert bad_visibility.json()["details"][0]["field"] == "visibility"
    bad_move = http.post(
        "registries/artifacts/labels",
        json={"registryRef": ref, "name": "p", "label": "prod", "version": "v1"},
        headers=org.headers,
    )
    assert bad_move.status_code == 400
    assert bad_move.json()["details"][0]["field"] == "version"


def test_versions_are_stored_once_and_never_rewritten(client, ref, db):
    published = client.registries.publish(ref, "p", "stored")
    client.registries.move_label(ref, "p", "production", published.version)
    client.registries.publish(ref, "p", "stored", labels=["staging"])
    with db.engine.connect() as connection:
        rows = connection.execute(
            text(
                "SELECT content, content_hash, number FROM registry_artifact_versions WHERE content = 'stored'"
            )
        ).all()
    assert rows == [("stored", published.content_hash, 1)]

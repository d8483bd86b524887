"""Who may read and write registries (public read without a key), and HTTP caching of retrieval."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import pytest

from api import OrgdeckClient
from api.errors import NotFound, Unauthorized
from service.api_keys.keys import generate_key
from tests.conftest import Org


@dataclass(frozen=True)
class Registries:
    public: str
    private: str


@pytest.fixture
def registries(client) -> Registries:
    suffix = uuid.uuid4().hex[:8]
    public = client.registries.create(f"open-{suffix}", visibility="public").registry_ref
    private = client.registries.create(f"closed-{suffix}").registry_ref
    for ref in (public, private):
        client.registries.publish(ref, "p", "hello {{name}}", version="1.0.0", labels=["production"])
    return Registries(public=public, private=private)


READS = {
    "list artifacts": ("registries/artifacts", {}),
    "list versions": ("registries/artifacts/versions", {"name": "p"}),
    "retrieve by label": ("registries/artifacts/retrieve", {"name": "p", "label": "production"}),
    "retrieve by version": ("registries/artifacts/retrieve", {"name": "p", "version": "1.0.0"}),
    "retrieve default": ("registries/artifacts/retrieve", {"name": "p"}),
}


def credentials(kind: str, org: Org, other_org: Org) -> dict[str, str]:
    return {
        "none": {},
        "own key": org.headers,
        "other org's key": other_org.headers,
        "invalid key": {"X-API-Key": generate_key()},
        "own key as bearer": {"Authorization": f"Bearer {org.key}"},
    }[kind]


# (visibility, credentials) → expected status of every read.
MATRIX = {
    ("public", "none"): 200,
    ("public", "own key"): 200,
    ("public", "own key as bearer"): 200,
    ("public", "other org's key"): 200,
    ("public", "invalid key"): 401,
    ("private", "none"): 401,
    ("private", "own key"): 200,
    ("private", "own key as bearer"): 200,
    ("private", "other org's key"): 404,
    ("private", "invalid key"): 401,
}


@pytest.mark.parametrize("read", list(READS), ids=list(READS))
@pytest.mark.parametrize("case", list(MATRIX), ids=[f"{v}-{c}" for v, c in MATRIX])
def test_read_access_matrix(http, org, other_org, registries, read, case):
    visibility, kind = case
    path, params = READS[read]
    ref = registries.public if visibility == "public" else registries.private
    response = http.get(
        path, params={"registryRef": ref, **params}, headers=credentials(kind, org, other_org)
    )
    assert response.status_code == MATRIX[case], response.text
    if response.status_code == 401:
        assert response.headers["www-authenticate"].startswith("Bearer")
    if response.status_code == 404:
        assert response.json()["details"][0]["field"] == "registryRef"  # as if it did not exist


def test_without_a_key_a_private_registry_looks_like_a_missing_one(http, registries):
    private = http.get("registries/artifacts", params={"registryRef": registries.private})
    missing = http.get("registries/artifacts", params={"registryRef": registries.private + "-nothing"})
    assert private.status_code == missing.status_code == 401
    assert private.json()["message"].replace(registries.private, "X") == missing.json()["message"].replace(
        registries.private + "-nothing", "X"
    )


def test_another_orgs_key_sees_a_private_registry_exactly_as_a_missing_one(http, other_org, registries):
    def error_of(ref: str) -> str:
        response = http.get(
            "registries/artifacts/retrieve",
            params={"registryRef": ref, "name": "p"},
            headers=other_org.headers,
        )
        assert response.status_code == 404
        return response.text.replace(ref, "X")

    assert error_of(registries.private) == error_of(registries.private + "-nothing")


WRITES = {
    "publish": ("POST", "registries/artifacts", {"name": "p", "content": "changed"}),
    "move label": (
        "POST",
        "registries/artifacts/labels",
        {"name": "p", "label": "staging", "version": "1.0.0"},
    ),
    "restore": ("POST", "registries/restore", {}),
    "delete": ("DELETE", "registries", None),
}


@pytest.mark.parametrize("write", list(WRITES), ids=list(WRITES))
@pytest.mark.parametrize("visibility", ["public", "private"])
def test_writes_need_a_key_of_the_owning_org(http, org, other_org, client, registries, write, visibility):
    method, path, extra = WRITES[write]
    ref = registries.public if visibility == "public" else registries.private

    def send(headers: dict[str, str]):
        if extra is None:
            return http.request(method, path, params={"registryRef": ref}, headers=headers)
        return http.request(method, path, json={"registryRef": ref, **extra}, headers=headers)

    assert send({}).status_code == 401
    assert send({"X-API-Key": generate_key()}).status_code == 401
    foreign = send(other_org.headers)
    assert foreign.status_code == 404, foreign.text
    # Nothing changed: the one version, its labels, the registry still live.
    versions = client.registries.versions(ref, "p").items
    assert [(v.version, v.labels) for v in versions] == [("1.0.0", ["latest", "production"])]
    assert send(org.headers).status_code == 200


def test_creating_and_listing_for_another_org_is_forbidden(http, org, other_org):
    created = http.post("registries", json={"orgSlug": org.slug, "name": "x"}, headers=other_org.headers)
    assert created.status_code == 403
    listed = http.get("registries", params={"orgSlug": org.slug}, headers=other_org.headers)
    assert listed.status_code == 403


def test_the_client_reads_public_registries_without_a_key(server, registries):
    with OrgdeckClient(server.url, max_retries=0) as anonymous:
        assert anonymous.registries.retrieve(registries.public, "p").content == "hello {{name}}"
        assert anonymous.registries.artifacts(registries.public).total == 1
        with pytest.raises(Unauthorized):
            anonymous.registries.retrieve(registries.private, "p")
        with pytest.raises(Unauthorized):
            anonymous.registries.publish(registries.public, "p", "x")


def test_the_client_with_another_orgs_key_gets_not_found(server, other_org, registries):
    with OrgdeckClient(server.url, other_org.key, max_retries=0) as other:
        with pytest.raises(NotFound):
            other.registries.retrieve(registries.private, "p")
        assert other.registries.retrieve(registries.public, "p").version == "1.0.0"


# -- caching ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("visibility", "selector", "expected"),
    [
        ("public", {"version": "1.0.0"}, "public, max-age=31536000, immutable"),
        ("private", {"version": "1.0.0"}, "private, max-age=31536000, immutable"),
        ("public", {"label": "production"}, "public, max-age=60"),
        ("private", {"label": "production"}, "private, max-age=60"),
        ("public", {}, "public, max-age=60"),
    ],
)
def test_cache_control_and_etag(http, org, registries, visibility, selector, expected):
    ref = registries.public if visibility == "public" else registries.private
    params = {"registryRef": ref, "name": "p", **selector}
    first = http.get("registries/artifacts/retrieve", params=params, headers=org.headers)
    assert first.status_code == 200
    assert first.headers["cache-control"] == expected
    etag = first.headers["etag"]
    assert etag.startswith('"') and etag.endswith('"')
    again = http.get("registries/artifacts/retrieve", params=params, headers=org.headers)
    assert again.headers["etag"] == etag
    for if_none_match in (etag, f"W/{etag}", f'"other", {etag}', "*"):
        cached = http.get(
            "registries/artifacts/retrieve",
            params=params,
            headers={**org.headers, "If-None-Match": if_none_match},
        )
        assert cached.status_code == 304, if_none_match
        assert cached.content == b""
        assert cached.headers["etag"] == etag
        assert cached.headers["cache-control"] == expected
    stale = http.get(
        "registries/artifacts/retrieve", params=params, headers={**org.headers, "If-None-Match": '"old"'}
    )
    assert stale.status_code == 200
    assert stale.json()["content"] == "hello {{name}}"


def test_etag_by_label_changes_when_the_label_moves(client, http, org, registries):
    params = {"registryRef": registries.private, "name": "p", "label": "production"}
    before = http.get("registries/artifacts/retrieve", params=params, headers=org.headers).headers["etag"]
    client.registries.publish(registries.private, "p", "second", labels=["production"])
    moved = http.get(
        "registries/artifacts/retrieve", params=params, headers={**org.headers, "If-None-Match": before}
    )
    assert moved.status_code == 200
    assert moved.json()["content"] == "second"
    assert moved.headers["etag"] != before


def test_a_private_answer_is_not_served_from_cache_without_a_key(http, org, registries):
    params = {"registryRef": registries.private, "name": "p", "version": "1.0.0"}
    etag = http.get("registries/artifacts/retrieve", params=params, headers=org.headers).headers["etag"]
    response = http.get("registries/artifacts/retrieve", params=params, headers={"If-None-Match": etag})
    assert response.status_code == 401


def test_a_kept_answer_by_version_is_served_only_after_access_is_decided_again(
    http, org, other_org, client, registries
):
    """The server keeps what it answered for a version (versions never change), never who may read it."""
    private = {"registryRef": registries.private, "name": "p", "version": "1.0.0"}
    public = {"registryRef": registries.public, "name": "p", "version": "1.0.0"}
    first = http.get("registries/artifacts/retrieve", params=private, headers=org.headers)
    assert first.status_code == 200
    assert (
        http.get("registries/artifacts/retrieve", params=private, headers=other_org.headers).status_code
        == 404
    )
    assert http.get("registries/artifacts/retrieve", params=private).status_code == 401
    assert (
        http.get("registries/artifacts/retrieve", params=private, headers=org.headers).json() == first.json()
    )

    kept = http.get("registries/artifacts/retrieve", params=public)
    assert kept.status_code == 200
    client.registries.delete(registries.public)
    gone = http.get("registries/artifacts/retrieve", params=public, headers=org.headers)
    assert gone.status_code == 404
    client.registries.restore(registries.public)
    back = http.get("registries/artifacts/retrieve", params=public)
    assert back.json() == kept.json()
    assert back.headers["etag"] == kept.headers["etag"]

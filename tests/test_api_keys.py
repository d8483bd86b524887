"""API keys: shown once, stored only as a hash, listed without secrets, revoked immediately."""

from __future__ import annotations

from datetime import datetime

import pytest
from sqlalchemy import text

from api.errors import BadRequest, NotFound, Unauthorized
from tests.conftest import raw_database_contains, wait_for


def test_create_returns_the_value_once_and_listing_never_does(client, http, org):
    created = client.api_keys.create("deploy-bot")
    assert created.key.startswith("odk_")
    assert created.prefix == created.key[:12]
    listing = http.get("api-keys", params={"orgSlug": org.slug}, headers=org.headers)
    assert listing.status_code == 200
    assert created.key not in listing.text
    item = next(i for i in listing.json()["items"] if i["id"] == created.id)
    assert set(item) == {"id", "name", "prefix", "role", "member", "createdAt", "lastUsedAt", "revokedAt"}
    assert item["createdAt"].endswith("Z")
    assert item["id"].startswith("key_")


def test_new_key_works_and_records_its_last_use(client, server, org):
    from api import OrgdeckClient

    created = client.api_keys.create("reader")
    assert created.last_used_at is None
    with OrgdeckClient(server.url, created.key) as as_new_key:
        assert as_new_key.whoami().key_id == created.id

    def last_used() -> datetime | None:
        return next(k for k in client.api_keys.list().items if k.id == created.id).last_used_at

    # Recorded just after the answer, so a read-only request never waits for the write lock.
    assert wait_for(last_used, what="lastUsedAt") is not None


def test_listing_is_newest_first_and_hides_revoked_keys(client):
    first = client.api_keys.create("first")
    second = client.api_keys.create("second")
    client.api_keys.revoke(first.id)
    ids = [k.id for k in client.api_keys.list().items]
    assert first.id not in ids
    assert ids.index(second.id) == 0


def test_revocation_is_immediate_and_final(client, server):
    from api import OrgdeckClient

    created = client.api_keys.create("short-lived")
    with OrgdeckClient(server.url, created.key, max_retries=0) as doomed:
        doomed.whoami()
        revoked = client.api_keys.revoke(created.id)
        assert revoked.revoked_at is not None
        with pytest.raises(Unauthorized, match="revoked"):
            doomed.whoami()
    with pytest.raises(NotFound):
        client.api_keys.revoke(created.id)


def test_a_key_cannot_revoke_itself(client):
    own_id = client.whoami().key_id
    with pytest.raises(BadRequest) as error:
        client.api_keys.revoke(own_id)
    assert error.value.code == "cannot_revoke_own_key"
    client.whoami()  # still works


def test_another_orgs_key_id_is_not_found(client, server, other_org):
    from api import OrgdeckClient

    with OrgdeckClient(server.url, other_org.key, org_slug=other_org.slug) as other:
        foreign = other.api_keys.create("theirs")
    with pytest.raises(NotFound):
        client.api_keys.revoke(foreign.id)
    with OrgdeckClient(server.url, foreign.key) as other:
        other.whoami()  # untouched


def test_key_values_are_stored_only_as_hashes(client, db, database_url):
    created = client.api_keys.create("needle")
    with db.engine.connect() as connection:
        rows = connection.execute(text("SELECT * FROM api_keys")).all()
    assert any(created.id in str(tuple(row)) for row in rows)
    assert all(created.key not in str(tuple(row)) for row in rows)
    assert raw_database_contains(database_url, created.id)  # the reader sees the row...
    assert not raw_database_contains(database_url, created.key)  # ...but never the value

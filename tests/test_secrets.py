"""Secrets: encrypted at rest, never shown again, rotated by version and by key."""

from __future__ import annotations

import os
import secrets
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest
from cryptography.fernet import Fernet
from sqlalchemy import inspect, select

from api import OrgdeckClient
from api.environments import SECRET_VALUE_MAX_BYTES
from api.errors import BadRequest, NotFound
from service.changes.models import ChangeRequestRow
from service.environments.models import DeploymentSigningKeyRow, SecretRow
from service.environments.service import decrypt_secret_values, rotate_secrets
from service.notifications.models import ChannelRow
from service.orgs.service import get_org
from service.runtime.server import ServerThread
from service.storage.crypto import Cipher, DecryptionFailed, cipher_for
from service.storage.db import Database
from service.storage.migrate import upgrade
from tests.conftest import count_rows, make_settings, new_org, raw_database_contains, scratch_database
from tests.test_cli import run_cli


def secret_value() -> str:
    """A value that can appear nowhere by chance."""
    return f"sv-{secrets.token_hex(16)}"


def org_id(db, slug: str) -> str:
    with db.session() as session:
        org = get_org(session, slug=slug)
        assert org is not None
        return org.id


def read_values(db, cipher: Cipher, slug: str, environment_id: str | None, *names: str) -> dict[str, str]:
    with db.session() as session:
        return decrypt_secret_values(
            session, cipher=cipher, org_id=org_id(db, slug), environment_id=environment_id, names=names
        )


def test_a_value_never_appears_in_responses_or_the_raw_database(client, http, org, db, database_url):
    environment = client.environments.create("production")
    value, rotated = secret_value(), secret_value()
    created = http.post(
        "environments/secrets",
        json={"orgSlug": org.slug, "name": "STRIPE_KEY", "value": value, "environmentId": environment.id},
        headers=org.headers,
    )
    assert created.status_code == 200
    assert set(created.json()) == {"id", "name", "environmentId", "version", "createdAt", "updatedAt"}
    again = http.post(
        "environments/secrets",
        json={"orgSlug": org.slug, "name": "STRIPE_KEY", "value": rotated, "environmentId": environment.id},
        headers=org.headers,
    )
    answers = [
        created,
        again,
        http.get("environments/secrets", params={"orgSlug": org.slug}, headers=org.headers),
        http.get(
            "environments/secrets",
            params={"orgSlug": org.slug, "environmentId": environment.id},
            headers=org.headers,
        ),
        http.get(f"environments/{environment.id}", params={"orgSlug": org.slug}, headers=org.headers),
        http.post("environments/list", json={"orgSlug": org.slug}, headers=org.headers),
        http.delete(
            f"environments/secrets/{created.json()['id']}", params={"orgSlug": org.slug}, headers=org.headers
        ),
    ]
    assert all(answer.status_code == 200 for answer in answers)
    assert all(value not in answer.text and rotated not in answer.text for answer in answers)
    client.environments.secrets.set("STRIPE_KEY", value, environment_id=environment.id)
    assert raw_database_contains(database_url, "STRIPE_KEY")  # the reader sees the row...
    assert not raw_database_contains(database_url, value)  # ...but never a value
    assert not raw_database_contains(database_url, rotated)


def test_writing_a_name_again_rotates_it_as_a_new_version(client, db, settings, org):
    staging = client.environments.create("staging")
    first = client.environments.secrets.set("ZENDESK_TOKEN", "zd-old", environment_id=staging.id)
    second = client.environments.secrets.set("ZENDESK_TOKEN", "zd-new", environment_id=staging.id)
    assert (first.version, second.version) == (1, 2)
    assert second.id == first.id
    assert second.created_at == first.created_at
    assert second.updated_at > first.updated_at
    assert [s.version for s in client.environments.secrets.list().items] == [2]
    values = read_values(db, cipher_for(settings), org.slug, staging.id, "ZENDESK_TOKEN")
    assert values == {"ZENDESK_TOKEN": "zd-new"}


def test_concurrent_writes_get_consecutive_versions(client, db, settings, org):
    values = [f"value-{n}" for n in range(8)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        versions = sorted(pool.map(lambda v: client.environments.secrets.set("RACED", v).version, values))
    assert versions == list(range(1, len(values) + 1))
    assert client.environments.secrets.list().total == 1
    assert read_values(db, cipher_for(settings), org.slug, None, "RACED")["RACED"] in values


def test_scopes_are_separate_and_an_environments_own_value_wins(client, db, settings, org):
    production = client.environments.create("production")
    staging = client.environments.create("staging")
    org_wide = client.environments.secrets.set("API_TOKEN", "from-org")
    own = client.environments.secrets.set("API_TOKEN", "from-production", environment_id=production.id)
    client.environments.secrets.set("ONLY_ORG", "org-only")
    assert own.id != org_wide.id
    assert (own.version, org_wide.version) == (1, 1)
    cipher = cipher_for(settings)
    names = ("API_TOKEN", "ONLY_ORG", "MISSING")
    assert read_values(db, cipher, org.slug, production.id, *names) == {
        "API_TOKEN": "from-production",
        "ONLY_ORG": "org-only",
    }
    assert read_values(db, cipher, org.slug, staging.id, *names) == {
        "API_TOKEN": "from-org",
        "ONLY_ORG": "org-only",
    }
    assert read_values(db, cipher, org.slug, None, "API_TOKEN") == {"API_TOKEN": "from-org"}
    listed = client.environments.secrets.list()
    assert [(s.name, s.environment_id) for s in listed.items] == [
        ("API_TOKEN", None),
        ("ONLY_ORG", None),
        ("API_TOKEN", production.id),
    ]
    only_production = client.environments.secrets.list(environment_id=production.id)
    assert [s.id for s in only_production.items] == [own.id]


def test_delete_a_secret(client):
    kept = client.environments.secrets.set("KEEP", "k")
    doomed = client.environments.secrets.set("DROP", "d")
    assert client.environments.secrets.delete(doomed.id).name == "DROP"
    assert [s.id for s in client.environments.secrets.list().items] == [kept.id]
    with pytest.raises(NotFound):
        client.environments.secrets.delete(doomed.id)


@dataclass(frozen=True)
class Isolated:
    db: Database
    database_url: str
    client: OrgdeckClient
    slug: str
    key: str


@pytest.fixture
def isolated(tmp_path) -> Iterator[Isolated]:
    """A service with one configured key on a database of its own: rotation sees only this test's secrets."""
    key = Fernet.generate_key().decode()
    with scratch_database(tmp_path) as url:
        settings = make_settings(tmp_path / "data", url, encryption_keys=[key])
        db = Database(settings.resolved_database_url)
        upgrade(db)
        org = new_org(db)
        server = ServerThread(settings).start()
        try:
            with OrgdeckClient(server.url, org.key, org_slug=org.slug) as client:
                yield Isolated(db=db, database_url=url, client=client, slug=org.slug, key=key)
        finally:
            server.stop()
            db.dispose()


def test_key_rotation_keeps_every_secret_readable(isolated):
    environment = isolated.client.environments.create("production")
    isolated.client.environments.secrets.set("ORG_WIDE", "value-one")
    isolated.client.environments.secrets.set("SCOPED", "value-two", environment_id=environment.id)
    expected = {"ORG_WIDE": "value-one", "SCOPED": "value-two"}
    old = Cipher([isolated.key])
    assert read_values(isolated.db, old, isolated.slug, environment.id, *expected) == expected
    new_key = Fernet.generate_key().decode()
    with isolated.db.session(write=True) as session:
        assert rotate_secrets(session, cipher=Cipher([new_key, isolated.key])) == 2
    assert read_values(isolated.db, Cipher([new_key]), isolated.slug, environment.id, *expected) == expected
    with pytest.raises(DecryptionFailed):
        read_values(isolated.db, old, isolated.slug, environment.id, "ORG_WIDE")


def stored_tokens(db: Database) -> dict[str, str]:
    """The ciphertext of every encrypted value in the database, by table and row."""
    columns = {
        "secret": SecretRow.ciphertext,
        "channel": ChannelRow.secret_encrypted,
        "signing key": DeploymentSigningKeyRow.ciphertext,
        "change request": ChangeRequestRow.sealed,
    }
    with db.session() as session:
        return {
            f"{label} {row_id}": token
            for label, column in columns.items()
            for row_id, token in session.execute(select(inspect(column.class_).primary_key[0], column))
            if token is not None
        }


def test_rotate_secrets_command(isolated, tmp_path):
    isolated.client.environments.secrets.set("CLI_ROTATED", "value-three")
    channel = isolated.client.notifications.create_channel(
        "Hook", "webhook", url="https://hooks.example.com/a"
    )
    target = isolated.client.environments.create(
        "production", target="webhook", webhook_url="https://deploy.example.com/hook"
    )
    signing_key = isolated.client.deployments.create_signing_key(target.id)
    isolated.client.change_requests.open(
        "environment", {"action": "setSecret", "name": "CLI_REVIEWED", "value": "value-four"}, "Waits"
    )
    old = Cipher([isolated.key])
    before = stored_tokens(isolated.db)
    assert sorted(old.decrypt(token) for token in before.values()) == sorted(
        ["value-three", channel.signing_secret, signing_key.secret, "value-four"]
    )
    new_key = Fernet.generate_key().decode()
    environment = {
        **os.environ,
        "ORGDECK_DATA_DIR": str(tmp_path),
        "ORGDECK_DATABASE_URL": isolated.database_url,
    }

    def rotate_with(*keys: str) -> subprocess.CompletedProcess[str]:
        return run_cli("rotate-secrets", env={**environment, "ORGDECK_ENCRYPTION_KEYS": ",".join(keys)})

    help_text = run_cli("rotate-secrets", "--help", env=environment)
    assert help_text.returncode == 0
    assert "first configured key" in help_text.stdout
    result = rotate_with(new_key, isolated.key)
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        "Re-encrypted 1 secrets, 0 provider keys, 1 channel secrets, 1 deployment signing keys, 1 values "
        "sealed in change requests and 5 stored idempotent answers under the first configured key.\n"
    )
    rotated = read_values(isolated.db, Cipher([new_key]), isolated.slug, None, "CLI_ROTATED")
    assert rotated == {"CLI_ROTATED": "value-three"}
    after = stored_tokens(isolated.db)
    assert after.keys() == before.keys()
    for row, token in after.items():
        assert token != before[row], f"{row} still holds its old ciphertext"
        assert Cipher([new_key]).decrypt(token) == old.decrypt(before[row])
        with pytest.raises(DecryptionFailed):
            old.decrypt(token)  # nothing is left that only the old key opens
    missing_key = rotate_with(isolated.key)  # the key the secret is under now is not configured
    assert missing_key.returncode == 1
    assert "ORGDECK_ENCRYPTION_KEYS" in missing_key.stderr
    assert "value-three" not in missing_key.stderr + missing_key.stdout
    assert read_values(isolated.db, Cipher([new_key]), isolated.slug, None, "CLI_ROTATED") == rotated


def bad_secret_bodies(value: str) -> dict[str, tuple[dict[str, object], str]]:
    return {
        "lowercase name": ({"name": "api_key", "value": value}, "name"),
        "name with dash": ({"name": "API-KEY", "value": value}, "name"),
        "name too long": ({"name": "A" * 129, "value": value}, "name"),
        "empty value": ({"name": "API_KEY", "value": ""}, "value"),
        "value too large": ({"name": "API_KEY", "value": value + "x" * SECRET_VALUE_MAX_BYTES}, "value"),
        "value not a string": ({"name": "API_KEY", "value": 12345}, "value"),
        "missing value": ({"name": "API_KEY"}, "value"),
        "unknown field": ({"name": "API_KEY", "value": value, "scope": "org"}, "scope"),
        "unknown environment": (
            {"name": "API_KEY", "value": value, "environmentId": "env_nope"},
            "environmentId",
        ),
    }


@pytest.mark.parametrize("case", list(bad_secret_bodies("")), ids=list(bad_secret_bodies("")))
def test_bad_secret_is_400_naming_the_field_without_echoing_the_value(http, db, org, case):
    value = secret_value()
    fields, field = bad_secret_bodies(value)[case]
    before = count_rows(db, "secrets")
    response = http.post("environments/secrets", json={"orgSlug": org.slug, **fields}, headers=org.headers)
    assert response.status_code == 400, response.text
    assert any(detail["field"] == field for detail in response.json()["details"])
    assert value not in response.text
    assert count_rows(db, "secrets") == before


def test_org_isolation(client, server, http, org, other_org, db):
    with OrgdeckClient(server.url, other_org.key, org_slug=other_org.slug) as other:
        their_environment = other.environments.create("production")
        their_secret = other.environments.secrets.set("THEIR_TOKEN", "theirs")
        query = {"orgSlug": org.slug}
        deleted = http.delete(f"environments/secrets/{their_secret.id}", params=query, headers=org.headers)
        assert deleted.status_code == 404
        with pytest.raises(BadRequest) as error:
            client.environments.secrets.set("MINE", "x", environment_id=their_environment.id)
        assert error.value.details[0].field == "environmentId"
        listed = http.get(
            "environments/secrets",
            params={**query, "environmentId": their_environment.id},
            headers=org.headers,
        )
        assert listed.json()["items"] == []
        assert client.environments.secrets.list().total == 0
        assert [s.id for s in other.environments.secrets.list().items] == [their_secret.id]
    with pytest.raises(BadRequest):
        client.environments.secrets.set("bad name", "x")

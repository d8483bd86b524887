"""Idempotency-Key on POST and PATCH: replayed answers, refused reuse, concurrent duplicates, retries."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import httpx
import pytest
from cryptography.fernet import Fernet
from sqlalchemy import delete, event, select, text, update

from api import OrgdeckClient
from service.idempotency.models import IdempotencyKeyRow
from service.idempotency.service import (
    Claim,
    IdempotencyKeyInUse,
    claim_key,
    expire_keys,
    mark_committed,
    rotate_answers,
)
from service.storage.crypto import Cipher, DecryptionFailed
from service.storage.db import Database, utcnow
from tests.conftest import SESSION_ENCRYPTION_KEY, count_rows, raw_database_contains, wait_for
from tests.fake_llm import FakeLLM, drafted, running_fake_llm
from tests.test_deployments import versioned_agent


def keyed(org, key: str) -> dict[str, str]:
    return {**org.headers, "Idempotency-Key": key}


def environment_names(http, org) -> list[str]:
    listed = http.post("environments/list", headers=org.headers, json={"orgSlug": org.slug}).json()
    return [environment["name"] for environment in listed["items"]]


def test_the_same_key_and_body_replays_the_answer_and_does_nothing_again(http, org):
    body = {"orgSlug": org.slug, "name": "staging", "description": "first"}
    first = http.post("environments", headers=keyed(org, "create-staging"), json=body)
    assert first.status_code == 200, first.text
    assert "idempotent-replayed" not in first.headers
    # The same body in another key order and spacing is the same request.
    again = http.post(
        "environments",
        headers={**keyed(org, "create-staging"), "Content-Type": "application/json"},
        content=b'{ "description": "first", "name": "staging", "orgSlug": "%s" }' % org.slug.encode(),
    )
    assert again.status_code == 200
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json() == first.json()
    assert again.headers["content-type"] == "application/json"
    assert environment_names(http, org) == ["staging"]


def test_a_keyed_write_looks_its_key_up_once(server, http, org):
    """The claim resolves the key; the route checks its caller against that, not a second lookup."""
    engine = server.app.state.db.engine
    lookups = []

    def count_lookups(_connection, _cursor, statement, *_rest) -> None:
        if "WHERE api_keys.key_hash" in statement:
            lookups.append(statement)

    event.listen(engine, "before_cursor_execute", count_lookups)
    try:
        created = http.post(
            "environments", headers=keyed(org, "looked-up-once"), json={"orgSlug": org.slug, "name": "once"}
        )
    finally:
        event.remove(engine, "before_cursor_execute", count_lookups)
    assert created.status_code == 200, created.text
    assert len(lookups) == 1


def test_patch_is_replayed_too(http, org):
    created = http.post("environments", headers=org.headers, json={"orgSlug": org.slug, "name": "qa"}).json()
    change = {"orgSlug": org.slug, "description": "v2"}
    first = http.patch(f"environments/{created['id']}", headers=keyed(org, "patch-qa"), json=change)
    http.patch(
        f"environments/{created['id']}", headers=org.headers, json={"orgSlug": org.slug, "description": "v3"}
    )
    replayed = http.patch(f"environments/{created['id']}", headers=keyed(org, "patch-qa"), json=change)
    assert replayed.headers["idempotent-replayed"] == "true"
    assert replayed.json() == first.json()
    now = http.get(f"environments/{created['id']}", headers=org.headers, params={"orgSlug": org.slug}).json()
    assert now["description"] == "v3"  # the replay did not write v2 again


def test_the_same_key_with_another_body_or_endpoint_is_400_and_changes_nothing(http, org):
    http.post("environments", headers=keyed(org, "k-1"), json={"orgSlug": org.slug, "name": "one"})
    other_body = http.post(
        "environments", headers=keyed(org, "k-1"), json={"orgSlug": org.slug, "name": "two"}
    )
    assert other_body.status_code == 400
    assert other_body.json()["code"] == "idempotency_key_reused"
    assert other_body.json()["details"][0]["field"] == "Idempotency-Key"
    assert "POST /api/environments" in other_body.json()["message"]
    other_path = http.post(
        "tools", headers=keyed(org, "k-1"), json={"orgSlug": org.slug, "toolKey": "t", "name": "T"}
    )
    assert other_path.json()["code"] == "idempotency_key_reused"
    assert environment_names(http, org) == ["one"]
    tools = http.get("tools", headers=org.headers, params={"orgSlug": org.slug}).json()
    assert tools["items"] == []


def test_keys_belong_to_one_organization(http, org, other_org):
    mine = http.post("environments", headers=keyed(org, "shared"), json={"orgSlug": org.slug, "name": "prod"})
    theirs = http.post(
        "environments", headers=keyed(other_org, "shared"), json={"orgSlug": other_org.slug, "name": "prod"}
    )
    assert theirs.status_code == 200
    assert "idempotent-replayed" not in theirs.headers
    assert theirs.json()["id"] != mine.json()["id"]


def secret_bearing_write(client: OrgdeckClient, org, operation: str) -> tuple[str, dict, str]:
    """(path, body, the answer's field shown once) of a write whose answer carries a secret."""
    if operation == "createApiKey":
        return "api-keys", {"orgSlug": org.slug, "name": "deployer", "role": "admin", "service": True}, "key"
    if operation == "createSigningKey":
        hook = client.environments.create("edge", target="webhook", webhook_url="https://hooks.example.com/x")
        return "agents/deployments/signing-key", {"orgSlug": org.slug, "environmentId": hook.id}, "secret"
    channel = client.notifications.create_channel("hook", "webhook", url="https://hooks.example.com/h")
    return f"notifications/channels/{channel.id}/rotate-secret", {"orgSlug": org.slug}, "signingSecret"


@pytest.mark.parametrize("operation", ["createApiKey", "createSigningKey", "rotateSecret"])
def test_an_answer_is_replayed_to_its_caller_alone(http, org, client, operation):
    """An answer may carry a secret shown once: another caller sending the same key and body makes a
    request of its own, run as itself, and never receives the first caller's answer."""
    path, body, secret = secret_bearing_write(client, org, operation)
    viewer = client.api_keys.create("reader", role="viewer", service=True).key
    other_admin = client.api_keys.create("other-admin", role="admin", service=True).key
    first = http.post(path, headers=keyed(org, "k1"), json=body)
    assert first.status_code == 200, first.text
    shown_once = first.json()[secret]

    as_viewer = http.post(path, headers={"X-API-Key": viewer, "Idempotency-Key": "k1"}, json=body)
    assert as_viewer.status_code == 403, as_viewer.text
    assert as_viewer.json()["code"] == "insufficient_role"
    assert "idempotent-replayed" not in as_viewer.headers
    assert shown_once not in as_viewer.text

    as_other_admin = http.post(path, headers={"X-API-Key": other_admin, "Idempotency-Key": "k1"}, json=body)
    assert as_other_admin.status_code == 200, as_other_admin.text
    assert "idempotent-replayed" not in as_other_admin.headers
    assert as_other_admin.json()[secret] != shown_once

    # The first caller's own retry is still its answer, replayed unchanged.
    again = http.post(path, headers=keyed(org, "k1"), json=body)
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json() == first.json()


def test_an_error_answer_is_replayed_as_it_was(http, org):
    http.post("environments", headers=org.headers, json={"orgSlug": org.slug, "name": "taken"})
    body = {"orgSlug": org.slug, "name": "taken"}
    first = http.post("environments", headers=keyed(org, "dup"), json=body)
    assert first.json()["code"] == "already_exists"
    again = http.post("environments", headers=keyed(org, "dup"), json=body)
    assert (again.status_code, again.json()) == (first.status_code, first.json())
    assert again.headers["idempotent-replayed"] == "true"


@pytest.mark.parametrize("key", ["", "two words", "x" * 256, "naïve"])
def test_a_malformed_key_is_400_naming_the_header(http, org, key):
    answer = http.post(
        "environments",
        headers=[*org.headers.items(), ("Idempotency-Key", key.encode())],
        json={"orgSlug": org.slug, "name": "never"},
    )
    assert answer.status_code == 400
    assert answer.json()["details"][0]["field"] == "Idempotency-Key"
    assert environment_names(http, org) == []


def test_without_a_valid_api_key_the_header_changes_nothing(http, org):
    for headers in ({"Idempotency-Key": "a"}, {"Idempotency-Key": "a", "X-API-Key": "odk_wrong"}):
        answer = http.post("environments", headers=headers, json={"orgSlug": org.slug, "name": "x"})
        assert answer.status_code == 401
        assert answer.json()["code"] == "unauthorized"


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    with running_fake_llm() as fake:
        fake.reply = drafted()  # a draft that passes its own tests: one call per request
        yield fake


def provider(client: OrgdeckClient, fake: FakeLLM) -> str:
    return client.providers.create(
        "Team model",
        "openai_compatible",
        base_url=f"{fake.url}/v1",
        api_key="sk-test-0123456789",
        models=["m"],
    ).id


def test_a_second_request_while_the_first_runs_is_409(http, org, client, fake_llm):
    body = {
        "orgSlug": org.slug,
        "instructions": "Never log secrets.",
        "providerId": provider(client, fake_llm),
    }
    fake_llm.behaviour, fake_llm.slow_seconds = "slow", 2.0
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(
            http.post, "governance/policies/generate-prompt", headers=keyed(org, "draft"), json=body
        )
        wait_for(lambda: fake_llm.requests, what="the first request to reach the provider")
        second = httpx.post(
            str(http.base_url) + "governance/policies/generate-prompt", headers=keyed(org, "draft"), json=body
        )
        assert second.status_code == 409
        assert second.json()["code"] == "idempotency_key_in_use"
        assert first.result().status_code == 200
    third = http.post("governance/policies/generate-prompt", headers=keyed(org, "draft"), json=body)
    assert third.headers["idempotent-replayed"] == "true"
    assert third.json() == first.result().json()
    assert len(fake_llm.requests) == 1


def test_a_5xx_frees_the_key_so_a_retry_runs_again(http, org, client, fake_llm):
    body = {
        "orgSlug": org.slug,
        "instructions": "Never log secrets.",
        "providerId": provider(client, fake_llm),
    }
    fake_llm.behaviour = 500
    failed = http.post("governance/policies/generate-prompt", headers=keyed(org, "draft-5xx"), json=body)
    assert failed.status_code == 502
    fake_llm.behaviour = "ok"
    retried = http.post("governance/policies/generate-prompt", headers=keyed(org, "draft-5xx"), json=body)
    assert retried.status_code == 200
    assert "idempotent-replayed" not in retried.headers
    assert len(fake_llm.requests) == 2


def test_concurrent_duplicates_create_exactly_one_job(http, org, client, db):
    versioned_agent(client, "bot")
    environment = client.environments.create("prod").id
    body = {"orgSlug": org.slug, "environmentId": environment, "agentStableKeys": ["bot"]}
    start = threading.Barrier(8)

    def deploy() -> httpx.Response:
        start.wait()
        return httpx.post(
            str(http.base_url) + "agents/deployments", headers=keyed(org, "deploy-1"), json=body
        )

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: deploy(), range(8)))
    assert {answer.status_code for answer in answers} <= {200, 409}
    ids = {answer.json()["id"] for answer in answers if answer.status_code == 200}
    assert len(ids) == 1
    assert [job.id for job in client.deployments.jobs().items] == list(ids)


class DroppingProxy:
    """A TCP proxy to the service that loses the service's answer on its first `drops` connections,
    as a load balancer timing out or a network failing after the request was handled."""

    def __init__(self, target_port: int, drops: int) -> None:
        self.target_port = target_port
        self.drops = drops
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                downstream, _ = self.listener.accept()
            except OSError:
                return
            drop, self.drops = self.drops > 0, self.drops - 1
            threading.Thread(target=self._serve, args=(downstream, drop), daemon=True).start()

    def _serve(self, downstream: socket.socket, drop: bool) -> None:
        upstream = socket.create_connection(("127.0.0.1", self.target_port))
        threading.Thread(target=_pump, args=(downstream, upstream), daemon=True).start()
        if drop:
            upstream.recv(65536)  # the service answered; the caller never hears it
            downstream.close()
            upstream.close()
            return
        _pump(upstream, downstream)

    def close(self) -> None:
        self.listener.close()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)


def test_a_client_retry_after_a_dropped_connection_creates_exactly_one_record(server, org, db):
    proxy = DroppingProxy(server.port, drops=1)
    try:
        with OrgdeckClient(f"http://127.0.0.1:{proxy.port}/api", org.key, org_slug=org.slug) as orgdeck:
            created = orgdeck.agents.create("retried", "openai")
            assert proxy.drops < 0  # the first answer was lost and the call went through again
            assert [agent.id for agent in orgdeck.agents.list().items] == [created.id]
    finally:
        proxy.close()


def test_a_client_timing_out_on_a_slow_request_retries_until_it_gets_the_one_answer(server, org, fake_llm):
    with OrgdeckClient(server.url, org.key, org_slug=org.slug, timeout=1.0, max_retries=8) as orgdeck:
        provider_id = provider(orgdeck, fake_llm)
        fake_llm.behaviour, fake_llm.slow_seconds = "slow", 2.0
        draft = orgdeck.policies.generate("Never log secrets.", provider_id=provider_id)
    assert draft.rule_text
    assert len(fake_llm.requests) == 1


def stored_key(db: Database, org_slug: str, key: str) -> IdempotencyKeyRow | None:
    from service.orgs.models import OrganizationRow

    with db.session() as session:
        org_id = session.scalar(select(OrganizationRow.id).where(OrganizationRow.slug == org_slug))
        return session.scalar(
            select(IdempotencyKeyRow).where(IdempotencyKeyRow.org_id == org_id, IdempotencyKeyRow.key == key)
        )


def set_key(db: Database, org_slug: str, key: str, **values: object) -> None:
    row = stored_key(db, org_slug, key)
    assert row is not None
    with db.session(write=True) as session:
        session.execute(
            update(IdempotencyKeyRow)
            .where(IdempotencyKeyRow.org_id == row.org_id, IdempotencyKeyRow.key == key)
            .values(**values)
        )


def test_a_key_whose_request_died_is_taken_over_once_its_lease_ends(http, org, db):
    body = {"orgSlug": org.slug, "name": "resumed"}
    http.post("environments", headers=keyed(org, "died"), json={"orgSlug": org.slug, "name": "resumed"})
    # As if the process had died while running the request: its work never committed.
    with db.session(write=True) as session:
        session.execute(
            update(IdempotencyKeyRow).values(state="running", locked_until=utcnow() + timedelta(minutes=1))
        )
    http.delete(
        f"environments/{environment_id(http, org, 'resumed')}",
        headers=org.headers,
        params={"orgSlug": org.slug},
    )
    assert http.post("environments", headers=keyed(org, "died"), json=body).status_code == 409
    set_key(db, org.slug, "died", locked_until=utcnow() - timedelta(seconds=1))
    taken_over = http.post("environments", headers=keyed(org, "died"), json=body)
    assert taken_over.status_code == 200
    assert "idempotent-replayed" not in taken_over.headers
    assert environment_names(http, org) == ["resumed"]


def environment_id(http, org, name: str) -> str:
    listed = http.post("environments/list", headers=org.headers, json={"orgSlug": org.slug}).json()
    return next(environment["id"] for environment in listed["items"] if environment["name"] == name)


def test_work_committed_without_a_recorded_answer_is_never_done_again(http, org, db):
    body = {"orgSlug": org.slug, "name": "once"}
    http.post("environments", headers=keyed(org, "lost"), json=body)
    # As if the process had died between committing the work and recording the answer.
    set_key(db, org.slug, "lost", state="committed", locked_until=utcnow() - timedelta(seconds=1))
    again = http.post("environments", headers=keyed(org, "lost"), json=body)
    assert again.status_code == 409
    assert again.json()["code"] == "idempotency_answer_lost"
    assert environment_names(http, org) == ["once"]


def test_a_request_whose_key_was_taken_over_cannot_commit(http, org, db):
    http.post("environments", headers=keyed(org, "held"), json={"orgSlug": org.slug, "name": "held"})
    row = stored_key(db, org.slug, "held")
    assert row is not None
    set_key(db, org.slug, "held", state="running", claim="newer-holder")
    with pytest.raises(IdempotencyKeyInUse), db.session(write=True) as session:
        mark_committed(session, Claim(row.org_id, row.caller_id, "held", row.claim))


def test_a_key_expired_and_removed_while_being_claimed_is_claimed_as_new(http, org, db):
    if db.is_sqlite:
        pytest.skip("SQLite's writers take turns: the worker cannot delete between the claim's statements")
    http.post("environments", headers=keyed(org, "vanishing"), json={"orgSlug": org.slug, "name": "first"})
    row = stored_key(db, org.slug, "vanishing")
    assert row is not None
    set_key(db, org.slug, "vanishing", created_at=utcnow() - timedelta(hours=24, seconds=1))
    removed: list[bool] = []

    def worker_expires_it(_connection, _cursor, statement, *_rest) -> None:
        # Right after the claim's INSERT met the old key, before the claim reads it.
        if statement.startswith("INSERT INTO idempotency_keys") and not removed:
            removed.append(True)
            with db.session(write=True) as other:
                other.execute(delete(IdempotencyKeyRow).where(IdempotencyKeyRow.key == "vanishing"))

    event.listen(db.engine, "after_cursor_execute", worker_expires_it)
    try:
        with db.session(write=True) as session:
            claimed = claim_key(
                session,
                cipher=Cipher([SESSION_ENCRYPTION_KEY]),
                org_id=row.org_id,
                caller_id=row.caller_id,
                key="vanishing",
                fingerprint="another request",
                method="POST",
                path="/api/environments",
            )
    finally:
        event.remove(db.engine, "after_cursor_execute", worker_expires_it)
    assert removed
    assert isinstance(claimed, Claim)
    held = stored_key(db, org.slug, "vanishing")
    assert held is not None
    assert (held.state, held.claim, held.fingerprint) == ("running", claimed.token, "another request")


def test_keys_expire_after_a_day_and_the_worker_removes_them(http, org, db, settings):
    http.post("environments", headers=keyed(org, "old"), json={"orgSlug": org.slug, "name": "first"})
    http.post("environments", headers=keyed(org, "fresh"), json={"orgSlug": org.slug, "name": "second"})
    set_key(db, org.slug, "old", created_at=utcnow() - timedelta(hours=24, seconds=1))
    # An expired key is a new key: another body is accepted and runs.
    reused = http.post("environments", headers=keyed(org, "old"), json={"orgSlug": org.slug, "name": "third"})
    assert reused.status_code == 200
    assert "idempotent-replayed" not in reused.headers
    set_key(db, org.slug, "old", created_at=utcnow() - timedelta(hours=25))
    before = count_rows(db, "idempotency_keys")
    expire_keys(db, settings)
    assert stored_key(db, org.slug, "old") is None
    assert stored_key(db, org.slug, "fresh") is not None
    assert count_rows(db, "idempotency_keys") == before - 1


def test_the_openapi_document_declares_the_header_on_every_post_and_patch(http):
    document = http.get("openapi.json").json()
    for path, item in document["paths"].items():
        for method, operation in item.items():
            names = {parameter["name"] for parameter in operation.get("parameters", [])}
            assert ("Idempotency-Key" in names) == (method in {"post", "patch"}), f"{method} {path}"
            if method in {"post", "patch"}:
                assert "409" in operation["responses"]


def test_requests_without_the_header_store_nothing(http, org, db):
    before = count_rows(db, "idempotency_keys")
    http.post(
        "environments", headers=org.headers, json={"orgSlug": org.slug, "name": f"n-{uuid.uuid4().hex[:6]}"}
    )
    assert count_rows(db, "idempotency_keys") == before


def test_stored_answers_are_encrypted_and_replay_a_value_shown_once(http, org, db, database_url):
    body = {"orgSlug": org.slug, "name": "ci"}
    first = http.post("api-keys", headers=keyed(org, "new-key"), json=body)
    again = http.post("api-keys", headers=keyed(org, "new-key"), json=body)
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json()["key"] == first.json()["key"]  # the retry gets the key it would have lost
    assert not raw_database_contains(database_url, first.json()["key"])
    listed = http.get("api-keys", headers=org.headers, params={"orgSlug": org.slug}).json()
    assert sorted(key["name"] for key in listed["items"]) == ["admin", "ci"]
    # An answer no configured key can open (its key was dropped) is never redone either.
    set_key(db, org.slug, "new-key", response_body_encrypted="gAAAAA-not-a-token")
    lost = http.post("api-keys", headers=keyed(org, "new-key"), json=body)
    assert lost.status_code == 409
    assert lost.json()["code"] == "idempotency_answer_lost"
    with db.session(write=True) as session:  # a value no key opens would stop rotate-secrets
        session.delete(session.merge(stored_key(db, org.slug, "new-key")))


def test_rotate_secrets_re_encrypts_stored_answers(http, org, db):
    body = {"orgSlug": org.slug, "name": "rotated"}
    first = http.post("api-keys", headers=keyed(org, "rotate-me"), json=body)
    new_key = Fernet.generate_key().decode()
    old, new = Cipher([SESSION_ENCRYPTION_KEY]), Cipher([new_key])
    with db.session(write=True) as session:
        assert rotate_answers(session, cipher=Cipher([new_key, SESSION_ENCRYPTION_KEY])) >= 1
    token = stored_key(db, org.slug, "rotate-me").response_body_encrypted
    assert json.loads(new.decrypt(token))["key"] == first.json()["key"]
    with pytest.raises(DecryptionFailed):
        old.decrypt(token)
    with db.session(write=True) as session:  # back under the key the running service has
        rotate_answers(session, cipher=Cipher([SESSION_ENCRYPTION_KEY, new_key]))
    assert http.post("api-keys", headers=keyed(org, "rotate-me"), json=body).json() == first.json()


def test_a_keys_bookkeeping_commits_without_waiting_for_the_disk_and_the_work_waits(db):
    """Claims and stored answers need not be on disk before the request goes on (see
    Database.session); the request's own work must be, and pooled connections stay durable."""
    if db.is_sqlite:
        pytest.skip("SQLite in WAL mode with synchronous=NORMAL never waits for the disk at commit")
    with db.session(write=True, durable=False) as session:
        assert session.scalar(text("SHOW synchronous_commit")) == "off"
    for _ in range(db.engine.pool.size() + 1):
        with db.session(write=True) as session:
            assert session.scalar(text("SHOW synchronous_commit")) == "on"

"""LLM provider connections: keys encrypted and never shown, real calls to loopback providers."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack

import pytest
from cryptography.fernet import Fernet
from sqlalchemy import select

from api import OrgdeckClient
from api.errors import BadRequest, NotFound, ServerError
from service.outbound.urls import OutboundRefused, check_outbound_url
from service.providers.models import ProviderConnectionRow
from service.providers.service import rotate_provider_keys
from service.runtime.server import ServerThread
from service.storage.crypto import Cipher
from tests.conftest import raw_database_contains
from tests.fake_llm import REPLY, FakeLLM, running_fake_llm, service_with

API_KEY = "sk-test-0123456789abcdefSECRET9876"


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    with running_fake_llm() as fake:
        yield fake


@pytest.fixture
def start_server(settings, database_url) -> Iterator[Callable[..., ServerThread]]:
    with ExitStack() as stack:
        yield lambda **overrides: stack.enter_context(service_with(settings, database_url, **overrides))


@pytest.fixture
def captured_logs() -> Iterator[list[str]]:
    """Every log line of the process while the test runs, at every level."""
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(self.format(record))

    handler = Collect(level=logging.DEBUG)
    root = logging.getLogger()
    previous = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    yield lines
    root.removeHandler(handler)
    root.setLevel(previous)


def compatible(client: OrgdeckClient, fake, *, name: str = "Local", **fields) -> str:
    """An openai_compatible connection to the fake provider; its id."""
    values = {"base_url": f"{fake.url}/v1", "api_key": API_KEY, "models": ["llama3.1:8b", "qwen2.5"]}
    values.update(fields)
    return client.providers.create(name, "openai_compatible", **values).id


# -- the connection itself ----------------------------------------------------------------


def test_create_shows_whether_a_key_is_set_never_the_key(client, http, org, fake_llm, database_url):
    created = http.post(
        "providers",
        headers=org.headers,
        json={
            "orgSlug": org.slug,
            "name": "Local Ollama",
            "kind": "openai_compatible",
            "baseUrl": f"{fake_llm.url}/v1/",
            "apiKey": API_KEY,
            "models": ["llama3.1:8b", "qwen2.5", "llama3.1:8b"],
        },
    )
    assert created.status_code == 200, created.text
    provider = created.json()
    assert provider["id"].startswith("prov_")
    assert provider["baseUrl"] == f"{fake_llm.url}/v1"
    assert provider["models"] == ["llama3.1:8b", "qwen2.5"]
    assert provider["defaultModel"] == "llama3.1:8b"
    assert provider["apiKeySet"] is True
    assert provider["apiKeyLast4"] == "9876"
    assert "apiKey" not in provider
    for answer in (
        created,
        http.get("providers", params={"orgSlug": org.slug}, headers=org.headers),
        http.get(f"providers/{provider['id']}", params={"orgSlug": org.slug}, headers=org.headers),
    ):
        assert answer.status_code == 200
        assert API_KEY not in answer.text
    assert not raw_database_contains(database_url, API_KEY)
    assert not raw_database_contains(database_url, API_KEY[3:-4])


def test_short_keys_show_no_last_characters(client, fake_llm):
    provider = client.providers.get(compatible(client, fake_llm, api_key="short-key"))
    assert provider.api_key_set is True
    assert provider.api_key_last4 is None


def test_kind_defaults(client):
    openai = client.providers.create("OpenAI", "openai", api_key=API_KEY, default_model="gpt-4o-mini")
    assert openai.base_url == "https://api.openai.com/v1"
    assert openai.models == ["gpt-4o-mini"]
    anthropic = client.providers.create("Claude", "anthropic", api_key=API_KEY, models=["claude-sonnet-4-5"])
    assert anthropic.base_url == "https://api.anthropic.com"
    assert anthropic.default_model == "claude-sonnet-4-5"
    azure = client.providers.create(
        "Azure",
        "azure_openai",
        base_url="https://acme.openai.azure.com",
        api_key=API_KEY,
        models=["gpt4o-prod"],
    )
    assert azure.api_version == "2024-10-21"
    assert openai.api_version is None


@pytest.mark.parametrize(
    ("fields", "field", "says"),
    [
        ({"kind": "gemini"}, "kind", "'openai', 'anthropic', 'azure_openai' or 'openai_compatible'"),
        ({"kind": "openai_compatible", "apiKey": None}, "baseUrl", "required for openai_compatible"),
        ({"kind": "azure_openai"}, "baseUrl", "required for azure_openai"),
        ({"kind": "openai", "apiKey": None}, "apiKey", "need an API key"),
        ({"kind": "anthropic", "apiKey": None}, "apiKey", "need an API key"),
        ({"kind": "openai", "baseUrl": "ftp://example.com"}, "baseUrl", "http:// or https://"),
        ({"kind": "openai", "baseUrl": "https://user:pw@example.com/v1"}, "baseUrl", "Credentials"),
        ({"kind": "openai", "apiVersion": "2024-10-21"}, "apiVersion", "azure_openai"),
        ({"kind": "openai", "name": " "}, "name", "at least 1 character"),
        ({"kind": "openai", "models": ["x"] * 101}, "models", "at most 100"),
        ({"kind": "openai", "temperature": 1}, "temperature", "not a known field"),
    ],
)
def test_invalid_connections_are_refused_naming_the_field(http, org, fields, field, says):
    payload = {"orgSlug": org.slug, "name": "P", "apiKey": API_KEY, **fields}
    payload = {k: v for k, v in payload.items() if v is not None}
    answer = http.post("providers", headers=org.headers, json=payload)
    assert answer.status_code == 400, answer.text
    assert answer.json()["details"][0]["field"] == field
    assert says in answer.json()["message"]


def test_names_are_unique_per_organization(client, server, other_org, fake_llm):
    compatible(client, fake_llm, name="Shared name")
    with pytest.raises(BadRequest) as error:
        compatible(client, fake_llm, name="Shared name")
    assert error.value.code == "already_exists"
    with OrgdeckClient(server.url, other_org.key, org_slug=other_org.slug) as other:
        compatible(other, fake_llm, name="Shared name")  # another org may use it


def test_update_changes_only_what_is_given(client, fake_llm, database_url):
    provider_id = compatible(client, fake_llm)
    new_key = "sk-rotated-ABCDEFGHIJKLMNOP4321"
    updated = client.providers.update(provider_id, name="Renamed", api_key=new_key, models=["qwen2.5"])
    assert (updated.name, updated.api_key_last4, updated.models) == ("Renamed", "4321", ["qwen2.5"])
    assert updated.default_model == "qwen2.5"  # the old default left the list
    assert updated.base_url == f"{fake_llm.url}/v1"
    assert not raw_database_contains(database_url, new_key)
    removed = client.providers.update(provider_id, remove_api_key=True)
    assert (removed.api_key_set, removed.api_key_last4) == (False, None)


def test_update_refuses_null_and_a_keyless_hosted_provider(client, http, org):
    provider = client.providers.create("OpenAI", "openai", api_key=API_KEY, default_model="gpt-4o")
    with pytest.raises(BadRequest) as error:
        client.providers.update(provider.id, remove_api_key=True)
    assert error.value.details[0].field == "apiKey"
    answer = http.patch(
        f"providers/{provider.id}", headers=org.headers, json={"orgSlug": org.slug, "name": None}
    )
    assert answer.status_code == 400
    assert answer.json()["details"][0]["field"] == "name"
    assert client.providers.get(provider.id).api_key_set is True


def test_delete_then_not_found(client, fake_llm):
    provider_id = compatible(client, fake_llm)
    assert client.providers.delete(provider_id).id == provider_id
    with pytest.raises(NotFound):
        client.providers.get(provider_id)
    assert provider_id not in {p.id for p in client.providers.list().items}


def test_another_orgs_connection_is_not_found(client, server, other_org, fake_llm):
    with OrgdeckClient(server.url, other_org.key, org_slug=other_org.slug) as other:
        theirs = compatible(other, fake_llm)
    for attempt in (
        lambda: client.providers.get(theirs),
        lambda: client.providers.update(theirs, name="mine now"),
        lambda: client.providers.test(theirs),
        lambda: client.providers.delete(theirs),
    ):
        with pytest.raises(NotFound):
            attempt()
    assert fake_llm.requests == []
    with OrgdeckClient(server.url, other_org.key, org_slug=other_org.slug) as other:
        assert other.providers.get(theirs).name == "Local"


# -- the adapters, seen from the provider's side ------------------------------------------


def test_openai_compatible_request_and_answer(client, fake_llm):
    result = client.providers.test(compatible(client, fake_llm))
    assert result.ok, result.message
    assert result.message == REPLY
    assert result.model == "llama3.1:8b-2025-01-01"  # the model the provider says answered
    assert result.latency_ms >= 0
    sent = fake_llm.last
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {API_KEY}"
    assert sent.headers["content-type"] == "application/json"
    assert set(sent.body) == {"model", "messages"}
    assert sent.body["model"] == "llama3.1:8b"
    assert [m["role"] for m in sent.body["messages"]] == ["system", "user"]
    assert sent.body["messages"][1]["content"] == "Reply with the single word OK."


def test_openai_compatible_without_a_key_sends_no_authorization(client, fake_llm):
    provider_id = compatible(client, fake_llm, api_key=None)
    assert client.providers.test(provider_id, model_id="qwen2.5").ok
    assert "authorization" not in fake_llm.last.headers
    assert fake_llm.last.body["model"] == "qwen2.5"


def test_openai_kind_with_its_own_base_url(client, fake_llm):
    provider = client.providers.create(
        "OpenAI", "openai", base_url=f"{fake_llm.url}/v1", api_key=API_KEY, default_model="gpt-4o-mini"
    )
    assert client.providers.test(provider.id).ok
    assert fake_llm.last.path == "/v1/chat/completions"
    assert fake_llm.last.headers["authorization"] == f"Bearer {API_KEY}"


def test_anthropic_request_and_answer(client, fake_llm):
    provider = client.providers.create(
        "Claude", "anthropic", base_url=fake_llm.url, api_key=API_KEY, models=["claude-sonnet-4-5"]
    )
    result = client.providers.test(provider.id)
    assert result.ok, result.message
    assert (result.message, result.model) == (REPLY, "claude-sonnet-4-5")
    sent = fake_llm.last
    assert sent.path == "/v1/messages"
    assert sent.headers["x-api-key"] == API_KEY
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in sent.headers
    assert set(sent.body) == {"model", "max_tokens", "system", "messages"}
    assert sent.body["model"] == "claude-sonnet-4-5"
    assert sent.body["max_tokens"] == 16
    assert sent.body["messages"] == [{"role": "user", "content": "Reply with the single word OK."}]


def test_azure_openai_request_and_answer(client, fake_llm):
    provider = client.providers.create(
        "Azure", "azure_openai", base_url=fake_llm.url, api_key=API_KEY, models=["gpt4o-prod"]
    )
    assert client.providers.test(provider.id).ok
    sent = fake_llm.last
    assert sent.path == "/openai/deployments/gpt4o-prod/chat/completions"
    assert sent.query == {"api-version": ["2024-10-21"]}
    assert sent.headers["api-key"] == API_KEY
    assert "authorization" not in sent.headers
    assert set(sent.body) == {"messages"}


@pytest.mark.parametrize(
    ("behaviour", "code", "says"),
    [
        (401, "provider_auth_failed", "refused the API key (HTTP 401)"),
        (403, "provider_auth_failed", "refused the API key (HTTP 403)"),
        (429, "provider_rate_limited", "rate limiting requests (HTTP 429); it asks to retry after 20 s"),
        (404, "provider_request_rejected", "rejected the request (HTTP 404)"),
        (500, "provider_error", "failed (HTTP 500)"),
        (503, "provider_error", "failed (HTTP 503)"),
        ("malformed", "provider_bad_response", "not a chat completions response"),
    ],
)
def test_failures_are_reported_naming_the_provider_and_why(client, fake_llm, behaviour, code, says):
    fake_llm.behaviour = behaviour
    result = client.providers.test(compatible(client, fake_llm, name="Team vLLM"))
    assert not result.ok
    assert result.code == code
    assert "provider 'Team vLLM'" in result.message
    assert says in result.message
    if isinstance(behaviour, int):
        assert "Incorrect API key provided" in result.message  # the provider's own words


def test_a_provider_quoting_the_key_does_not_leak_it(client, fake_llm):
    fake_llm.behaviour = 401
    fake_llm.error_message = f"Incorrect API key provided: {API_KEY}"
    result = client.providers.test(compatible(client, fake_llm))
    assert result.code == "provider_auth_failed"
    assert API_KEY not in result.message
    assert "[redacted]" in result.message


def test_a_slow_provider_times_out(start_server, org, fake_llm):
    fake_llm.behaviour = "slow"
    fake_llm.slow_seconds = 5
    server = start_server(provider_timeout_seconds=0.5)
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as client:
        provider_id = compatible(client, fake_llm)
        started = time.monotonic()
        result = client.providers.test(provider_id)
    assert time.monotonic() - started < 4
    assert (result.ok, result.code) == (False, "provider_timeout")
    assert "did not answer within 0.5 s" in result.message


def test_an_unreachable_provider(client, fake_llm):
    provider_id = compatible(client, fake_llm, base_url="http://127.0.0.1:9/v1")
    result = client.providers.test(provider_id)
    assert (result.ok, result.code) == (False, "provider_unreachable")
    assert "Could not reach provider 'Local'" in result.message


def test_private_addresses_are_refused_unless_the_operator_allows_them(start_server, org, fake_llm):
    server = start_server(outbound_allow_private=[])
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as client:
        result = client.providers.test(compatible(client, fake_llm))
    assert (result.ok, result.code) == (False, "outbound_refused")
    assert "ORGDECK_OUTBOUND_ALLOW_PRIVATE" in result.message
    assert fake_llm.requests == []


@pytest.mark.parametrize(
    ("url", "allowed", "refused"),
    [
        ("http://127.0.0.1:11434/v1", [], True),
        ("http://10.1.2.3/v1", [], True),
        ("http://169.254.169.254/latest", [], True),
        ("http://[::1]:8000/v1", [], True),
        ("http://[::ffff:127.0.0.1]/v1", [], True),
        ("http://localhost:8000/v1", [], True),
        ("http://8.8.8.8/v1", [], False),
        ("http://127.0.0.1:11434/v1", ["*"], False),
        ("http://10.1.2.3/v1", ["10.0.0.0/8"], False),
        ("http://10.1.2.3/v1", ["192.168.0.0/16"], True),
        ("http://localhost:8000/v1", ["localhost"], False),
        ("ftp://8.8.8.8/", ["*"], True),
        ("https://\u00e1Z\u00bd\u00822/", [], True),  # no host name IDNA can encode
        ("http://[::1/v1", ["*"], True),  # an unclosed IPv6 bracket
        ("http://8.8.8.8:99999/v1", ["*"], True),  # a port past 65535
    ],
)
def test_outbound_rule(settings, url, allowed, refused):
    rule = settings.model_copy(update={"outbound_allow_private": allowed})
    if refused:
        with pytest.raises(OutboundRefused):
            check_outbound_url(url, rule)
    else:
        check_outbound_url(url, rule)


# -- system models, logs, rotation --------------------------------------------------------


def test_system_models_default_to_the_builtin_drafter(client):
    models = client.providers.system_models().items
    assert [(m.key, m.builtin, m.default, m.available) for m in models] == [
        ("builtin-template", True, True, True)
    ]


def test_system_models_list_what_the_operator_configured(start_server, org, fake_llm, monkeypatch):
    monkeypatch.setenv("ORGDECK_SYSTEM_MODEL_CLAUDE_FAST_API_KEY", API_KEY)
    server = start_server(
        system_models=(
            f"local=openai_compatible:llama3.1:8b@{fake_llm.url}/v1,"
            "claude-fast=anthropic:claude-haiku-4-5,gpt=openai:gpt-4o-mini"
        )
    )
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as client:
        models = {m.key: m for m in client.providers.system_models().items}
    assert list(models) == ["builtin-template", "local", "claude-fast", "gpt"]
    assert (models["local"].model, models["local"].base_url) == ("llama3.1:8b", f"{fake_llm.url}/v1")
    assert models["local"].available and models["claude-fast"].available
    assert models["claude-fast"].base_url == "https://api.anthropic.com"
    assert not models["gpt"].available
    assert "ORGDECK_SYSTEM_MODEL_GPT_API_KEY" in models["gpt"].description


def test_the_key_never_reaches_the_logs(client, fake_llm, captured_logs):
    provider_id = compatible(client, fake_llm)
    client.providers.test(provider_id)
    client.policies.generate("Never log secrets.", provider_id=provider_id)
    fake_llm.behaviour = 401
    fake_llm.error_message = f"Incorrect API key provided: {API_KEY}"
    client.providers.test(provider_id)
    with pytest.raises(ServerError):
        client.policies.generate("Never log secrets.", provider_id=provider_id)
    client.providers.update(provider_id, api_key=API_KEY + "X")
    assert captured_logs, "nothing was logged: the check would prove nothing"
    assert not [line for line in captured_logs if API_KEY in line]


def test_rotation_re_encrypts_every_key_under_the_first(client, db, settings, fake_llm):
    provider_id = compatible(client, fake_llm)
    new_key = Fernet.generate_key().decode()
    [old_key] = settings.encryption_keys
    with db.session(write=True) as session:
        rotated = rotate_provider_keys(session, Cipher([new_key, old_key]))
    assert rotated >= 1
    with db.session() as session:
        token = session.scalar(
            select(ProviderConnectionRow.api_key_encrypted).where(ProviderConnectionRow.id == provider_id)
        )
    assert Cipher([new_key]).decrypt(token) == API_KEY
    with db.session(write=True) as session:  # back to the running service's key, for the tests after this
        assert rotate_provider_keys(session, Cipher([old_key, new_key])) == rotated
    assert client.providers.test(provider_id).ok


def test_a_stored_key_never_follows_the_connection_to_another_host(client, fake_llm):
    provider_id = compatible(client, fake_llm)
    with pytest.raises(BadRequest) as error:
        client.providers.update(provider_id, base_url="https://collector.example.com/v1")
    assert error.value.details[0].field == "apiKey"
    assert client.providers.get(provider_id).base_url == f"{fake_llm.url}/v1"
    same_host = client.providers.update(provider_id, base_url=f"{fake_llm.url}/openai/v1")
    assert same_host.base_url == f"{fake_llm.url}/openai/v1"
    moved = client.providers.update(provider_id, base_url="https://llm.example.com/v1", api_key=API_KEY + "2")
    assert (moved.base_url, moved.api_key_last4) == ("https://llm.example.com/v1", "8762")


def test_an_explicit_default_model_joins_the_new_list(client, fake_llm):
    provider_id = compatible(client, fake_llm)
    updated = client.providers.update(provider_id, models=["a", "b"], default_model="c")
    assert (updated.models, updated.default_model) == (["a", "b", "c"], "c")

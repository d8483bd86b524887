"""Trying a prompt: a version rendered with its variables and run on a model of the organization
(the loopback fake provider), nothing saved, the run on record without the key."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from api import OrgdeckClient
from tests.conftest import count_rows
from tests.fake_llm import FakeLLM, running_fake_llm

API_KEY = "sk-try-prompt-0123456789ABCDEFwxyz"
TRIAGE_V1 = "You triage tickets for {{company}}. Ticket: {{ticket}}"
TRIAGE_V2 = "You triage tickets for {{company}} and say the priority first. Ticket: {{ticket}}"
VARIABLES = {"company": "Acme", "ticket": "Checkout is down"}


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    with running_fake_llm() as fake:
        yield fake


@pytest.fixture
def prompt(client: OrgdeckClient, org) -> str:
    """A registry with two text versions and a chat version of the prompt `triage`."""
    ref = client.registries.create("support").registry_ref
    client.registries.publish(ref, "triage", TRIAGE_V1)
    client.registries.publish(ref, "triage", TRIAGE_V2)
    client.registries.publish(
        ref,
        "triage",
        [
            {"role": "system", "content": "You work for {{company}}."},
            {"role": "user", "content": "{{ticket}}"},
        ],
    )
    return ref


@pytest.fixture
def provider_id(client: OrgdeckClient, fake_llm: FakeLLM) -> str:
    return client.providers.create(
        "Team models",
        "openai_compatible",
        base_url=f"{fake_llm.url}/v1",
        api_key=API_KEY,
        models=["llama3.1:8b"],
    ).id


def try_prompt(http, org, ref: str, **fields):
    body = {"registryRef": ref, "name": "triage", "version": "1", "variables": VARIABLES, **fields}
    return http.post("registries/artifacts/try", headers=org.headers, json=body)


def test_a_version_is_rendered_and_run_on_the_provider(http, org, prompt, provider_id, fake_llm):
    answer = try_prompt(http, org, prompt, providerId=provider_id)
    assert answer.status_code == 200, answer.text
    run = answer.json()
    assert run["rendered"] == "You triage tickets for Acme. Ticket: Checkout is down"
    assert run["answer"] == fake_llm.reply
    assert (run["inputTokens"], run["outputTokens"], run["totalTokens"]) == (120, 45, 165)
    assert run["model"] == "llama3.1:8b-2025-01-01"
    assert run["latencyMs"] >= 0
    assert (run["name"], run["version"], run["providerId"]) == ("triage", "1", provider_id)
    sent = fake_llm.last.body
    assert sent["model"] == "llama3.1:8b"
    assert sent["messages"][-1] == {"role": "user", "content": run["rendered"]}


def test_two_versions_answer_on_the_same_variables(client, prompt, provider_id, fake_llm):
    first = client.registries.try_prompt(prompt, "triage", "1", variables=VARIABLES, provider_id=provider_id)
    second = client.registries.try_prompt(prompt, "triage", "2", variables=VARIABLES, provider_id=provider_id)
    assert first.rendered != second.rendered
    assert "say the priority first" in second.rendered
    assert [request.body["messages"][-1]["content"] for request in fake_llm.requests] == [
        first.rendered,
        second.rendered,
    ]


def test_a_chat_version_sends_its_system_messages_as_instructions(client, prompt, provider_id, fake_llm):
    run = client.registries.try_prompt(prompt, "triage", "3", variables=VARIABLES, provider_id=provider_id)
    assert fake_llm.last.body["messages"] == [
        {"role": "system", "content": "You work for Acme."},
        {"role": "user", "content": "Checkout is down"},
    ]
    assert run.rendered == "[system]\nYou work for Acme.\n\n[user]\nCheckout is down"


def test_a_missing_variable_is_a_400_naming_it_and_calls_no_model(http, org, prompt, provider_id, fake_llm):
    answer = try_prompt(http, org, prompt, providerId=provider_id, variables={"company": "Acme"})
    assert answer.status_code == 400, answer.text
    error = answer.json()
    assert error["details"][0]["field"] == "variables.ticket"
    assert "'ticket'" in error["message"]
    assert fake_llm.requests == []


@pytest.mark.parametrize(
    ("fields", "status", "field"),
    [
        ({"version": "9"}, 404, "version"),
        ({"name": "nothing"}, 404, "name"),
        ({"registryRef": "acme/none"}, 404, "registryRef"),
        ({"providerId": "prv_unknown"}, 404, None),
        ({"systemModelKey": "nope"}, 400, "systemModelKey"),
        ({"modelId": "llama3.1:8b"}, 400, "providerId"),
    ],
)
def test_what_does_not_exist_is_refused_before_any_call(
    http, org, prompt, provider_id, fake_llm, fields, status, field
):
    chosen = {} if "systemModelKey" in fields or "modelId" in fields else {"providerId": provider_id}
    answer = try_prompt(http, org, prompt, **{**chosen, **fields})
    assert answer.status_code == status, answer.text
    if field is not None:
        assert answer.json()["details"][0]["field"] == field
    assert fake_llm.requests == []


def test_a_viewer_may_not_try_and_an_author_may(http, org, client, prompt, provider_id):
    viewer = client.api_keys.create("reader", role="viewer", service=True).key
    author = client.api_keys.create("writer", role="author", service=True).key
    body = {
        "registryRef": prompt,
        "name": "triage",
        "version": "1",
        "variables": VARIABLES,
        "providerId": provider_id,
    }
    refused = http.post("registries/artifacts/try", headers={"X-API-Key": viewer}, json=body)
    assert refused.status_code == 403, refused.text
    assert refused.json()["code"] == "insufficient_role"
    allowed = http.post("registries/artifacts/try", headers={"X-API-Key": author}, json=body)
    assert allowed.status_code == 200, allowed.text


def test_a_run_is_one_audit_event_naming_the_model_never_the_key(client, db, prompt, provider_id):
    versions_before = count_rows(db, "registry_artifact_versions")
    run = client.registries.try_prompt(
        prompt, "triage", "1", variables=VARIABLES, provider_id=provider_id, model_id="llama3.1:8b"
    )
    events = client.audit.list(action="tryPrompt").items
    assert len(events) == 1
    (event,) = events
    assert (event.target.type, event.target.id, event.target.name) == (
        "artifact_version",
        run.artifact_version_id,
        "triage",
    )
    assert event.changes["providerId"] == provider_id
    assert event.changes["modelId"] == "llama3.1:8b"
    assert API_KEY not in json.dumps(event.model_dump(mode="json"))
    assert count_rows(db, "registry_artifact_versions") == versions_before


@pytest.mark.parametrize(
    ("behaviour", "code", "says"),
    [
        (401, "provider_auth_failed", "refused the API key (HTTP 401)"),
        (500, "provider_error", "failed (HTTP 500)"),
        ("malformed", "provider_bad_response", "not a chat completions response"),
    ],
)
def test_a_provider_failure_is_a_502_in_words_and_leaves_no_event(
    http, org, client, prompt, provider_id, fake_llm, behaviour, code, says
):
    fake_llm.behaviour = behaviour
    answer = try_prompt(http, org, prompt, providerId=provider_id)
    assert answer.status_code == 502, answer.text
    error = answer.json()
    assert error["code"] == code
    assert "provider 'Team models'" in error["message"]
    assert says in error["message"]
    assert API_KEY not in answer.text
    assert client.audit.list(action="tryPrompt").items == []

"""Governance: drafting rule text (built-in drafter, system models, the org's providers) and policies."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from api import OrgdeckClient
from api.errors import BadRequest, NotFound, ServerError
from api.governance import GeneratePolicyPrompt
from service.governance.demo import DEMO_POLICIES, EXAMPLE_PROVIDER, seed_governance
from service.governance.drafting import SYSTEM_PROMPT, drafting_prompt
from tests.conftest import count_rows
from tests.fake_llm import REPLY, FakeLLM, drafted, running_fake_llm, service_with

API_KEY = "sk-governance-0123456789ABCDEFwxyz"
INSTRUCTIONS = "Never log customer PII. Always use TLS for outbound calls.\n- No secrets in prompts"


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    with running_fake_llm() as fake:
        fake.reply = drafted(REPLY)
        yield fake


def generate(http, org, **fields):
    return http.post(
        "governance/policies/generate-prompt",
        headers=org.headers,
        json={"orgSlug": org.slug, "instructions": INSTRUCTIONS, **fields},
    )


def connection(client: OrgdeckClient, fake: FakeLLM, kind: str = "openai_compatible", **fields) -> str:
    base_url = f"{fake.url}/v1" if kind == "openai_compatible" else fake.url
    values = {"base_url": base_url, "api_key": API_KEY, "models": ["llama3.1:8b", "qwen2.5"], **fields}
    return client.providers.create(f"Team {kind}", kind, **values).id


# -- the request, as the spec's table says ------------------------------------------------


def test_defaults_draft_with_the_builtin_drafter(http, org):
    answer = generate(http, org)
    assert answer.status_code == 200, answer.text
    draft = answer.json()
    assert (draft["description"], draft["category"], draft["severity"]) == ("", "security", "error")
    assert draft["name"] == "Do not log customer PII"
    assert draft["builtin"] is True
    assert "built-in template drafter" in draft["notice"]
    assert draft["draftedWith"] == {
        "source": "system",
        "kind": "builtin",
        "name": "Built-in template drafter",
        "model": "builtin-template",
        "providerId": None,
        "systemModelKey": "builtin-template",
    }
    assert draft["usage"] is None
    assert draft["ruleText"] == (
        "Title: Do not log customer PII\n"
        "Category: security · Severity: error (a violation blocks the action)\n"
        "Scope: Every agent of the organization, the tools it calls and the data it handles.\n"
        "\n"
        "Rules:\n"
        "1. MUST NOT log customer PII.\n"
        "2. MUST use TLS for outbound calls.\n"
        "3. MUST NOT allow secrets in prompts.\n"
        "\n"
        "Rationale: Keeps the organization's systems and data safe from misuse and leaks."
    )


def test_the_builtin_drafter_is_deterministic_and_uses_the_fields(http, org):
    fields = {
        "name": "Customer data",
        "description": "Support agents see customer records.",
        "category": "compliance",
        "severity": "warning",
        "providerSource": "system",
        "systemModelKey": "builtin-template",
    }
    first, second = generate(http, org, **fields).json(), generate(http, org, **fields).json()
    assert first["ruleText"] == second["ruleText"]
    assert first["ruleText"].startswith("Title: Customer data\nCategory: compliance · Severity: warning")
    assert first["ruleText"].endswith("Rationale: Support agents see customer records.")
    assert (first["name"], first["category"], first["severity"]) == ("Customer data", "compliance", "warning")


@pytest.mark.parametrize(
    ("fields", "field", "says"),
    [
        ({"category": "privacy"}, "category", "'security', 'quality', 'compliance' or 'identity'"),
        ({"severity": "critical"}, "severity", "'error' or 'warning'"),
        ({"providerSource": "mine"}, "providerSource", "'system' or 'custom'"),
        ({"instructions": "   "}, "instructions", "at least 1 character"),
        ({"instructions": None}, "instructions", "is required"),
        ({"orgSlug": None}, "orgSlug", "is required"),
        ({"temperature": 0.2}, "temperature", "not a known field"),
        ({"providerSource": "custom"}, "providerId", "needs providerId"),
        ({"providerSource": "system", "providerId": "prov_x"}, "providerId", "custom only"),
        ({"modelId": "gpt-4o"}, "modelId", "custom only"),
        (
            {"providerSource": "custom", "providerId": "prov_x", "systemModelKey": "k"},
            "systemModelKey",
            "system only",
        ),
        ({"systemModelKey": "gpt-5"}, "systemModelKey", "the system models are: builtin-template"),
    ],
)
def test_invalid_requests_are_400_naming_the_field(http, org, fields, field, says):
    payload = {"orgSlug": org.slug, "instructions": INSTRUCTIONS, **fields}
    answer = http.post(
        "governance/policies/generate-prompt",
        headers=org.headers,
        json={k: v for k, v in payload.items() if v is not None},
    )
    assert answer.status_code == 400, answer.text
    assert answer.json()["details"][0]["field"] == field
    assert says in answer.json()["message"]


def test_another_orgs_provider_is_not_found(http, org, server, other_org, fake_llm):
    with OrgdeckClient(server.url, other_org.key, org_slug=other_org.slug) as other:
        theirs = connection(other, fake_llm)
    answer = generate(http, org, providerSource="custom", providerId=theirs)
    assert answer.status_code == 404
    assert answer.json()["details"][0]["field"] == "providerId"
    assert fake_llm.requests == []


# -- drafting with the organization's own providers ---------------------------------------


def test_openai_compatible_draft(client, fake_llm):
    provider_id = connection(client, fake_llm)
    draft = client.policies.generate(
        INSTRUCTIONS,
        provider_source="custom",
        provider_id=provider_id,
        category="identity",
        description="Why",
    )
    sent = fake_llm.last
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {API_KEY}"
    expected_prompt = drafting_prompt(
        GeneratePolicyPrompt(org_slug="x", instructions=INSTRUCTIONS, category="identity", description="Why")
    )
    assert sent.body == {
        "model": "llama3.1:8b",
        "messages": [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": expected_prompt},
        ],
    }
    assert INSTRUCTIONS in expected_prompt and "Category: identity" in expected_prompt
    assert draft.rule_text == REPLY
    assert draft.name == "Keep secrets out of logs"  # the Title line the model wrote
    assert (draft.category, draft.severity, draft.description) == ("identity", "error", "Why")
    assert draft.builtin is False and draft.notice is None
    assert draft.drafted_with.model_dump() == {
        "source": "custom",
        "kind": "openai_compatible",
        "name": "Team openai_compatible",
        "model": "llama3.1:8b-2025-01-01",
        "providerId": provider_id,
        "systemModelKey": None,
    }
    assert draft.usage is not None
    assert (draft.usage.input_tokens, draft.usage.output_tokens, draft.usage.total_tokens) == (120, 45, 165)


def test_anthropic_draft(client, fake_llm):
    provider_id = connection(client, fake_llm, "anthropic", models=["claude-sonnet-4-5"])
    draft = client.policies.generate(INSTRUCTIONS, provider_id=provider_id, name="Secrets")
    sent = fake_llm.last
    assert sent.path == "/v1/messages"
    assert (sent.headers["x-api-key"], sent.headers["anthropic-version"]) == (API_KEY, "2023-06-01")
    expected_prompt = drafting_prompt(
        GeneratePolicyPrompt(org_slug="x", instructions=INSTRUCTIONS, name="Secrets")
    )
    assert sent.body == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 2048,
        "system": SYSTEM_PROMPT,
        "messages": [{"role": "user", "content": expected_prompt}],
    }
    assert draft.name == "Secrets"  # the author's name wins over the model's title
    assert draft.drafted_with.source == "custom"  # inferred from providerId
    assert draft.usage is not None
    assert (draft.usage.input_tokens, draft.usage.output_tokens, draft.usage.total_tokens) == (80, 30, 110)


def test_model_id_overrides_the_default_and_is_needed_without_one(client, fake_llm):
    provider_id = connection(client, fake_llm)
    client.policies.generate(INSTRUCTIONS, provider_id=provider_id, model_id="qwen2.5")
    assert fake_llm.last.body["model"] == "qwen2.5"
    bare = connection(client, fake_llm, "openai", models=[], base_url=f"{fake_llm.url}/v1")
    with pytest.raises(BadRequest) as error:
        client.policies.generate(INSTRUCTIONS, provider_id=bare)
    assert error.value.details[0].field == "modelId"


@pytest.mark.parametrize(
    ("behaviour", "status", "code", "says"),
    [
        (401, 502, "provider_auth_failed", "refused the API key (HTTP 401)"),
        (429, 502, "provider_rate_limited", "rate limiting requests (HTTP 429)"),
        (500, 502, "provider_error", "failed (HTTP 500)"),
        ("malformed", 502, "provider_bad_response", "not a chat completions response"),
    ],
)
def test_provider_failures_are_clear_errors(http, org, client, fake_llm, behaviour, status, code, says):
    provider_id = connection(client, fake_llm)
    fake_llm.behaviour = behaviour
    answer = generate(http, org, providerId=provider_id)
    assert answer.status_code == status, answer.text
    error = answer.json()
    assert error["code"] == code
    assert "provider 'Team openai_compatible'" in error["message"]
    assert says in error["message"]
    assert "Traceback" not in answer.text


def test_a_slow_provider_is_a_504_not_a_hang(settings, database_url, org, fake_llm):
    fake_llm.behaviour = "slow"
    with (
        service_with(settings, database_url, provider_timeout_seconds=0.5) as server,
        OrgdeckClient(server.url, org.key, org_slug=org.slug, max_retries=0) as client,
    ):
        provider_id = connection(client, fake_llm)
        with pytest.raises(ServerError) as error:
            client.policies.generate(INSTRUCTIONS, provider_id=provider_id)
    assert error.value.status == 504
    assert error.value.code == "provider_timeout"
    assert "did not answer within 0.5 s" in error.value.message


# -- drafting with the operator's system models -------------------------------------------


def test_system_models_are_the_operators_to_point_anywhere(
    settings, database_url, org, fake_llm, monkeypatch
):
    monkeypatch.setenv("ORGDECK_SYSTEM_MODEL_HOUSE_API_KEY", API_KEY)
    overrides = {"system_models": [f"house=anthropic:claude-haiku-4-5@{fake_llm.url}", "gpt=openai:gpt-4o"]}
    # No private address is allowed for organizations' URLs: the operator's own still work.
    with (
        service_with(settings, database_url, outbound_allow_private=[], **overrides) as server,
        OrgdeckClient(server.url, org.key, org_slug=org.slug) as client,
    ):
        draft = client.policies.generate(INSTRUCTIONS, provider_source="system", system_model_key="house")
        with pytest.raises(BadRequest) as unavailable:
            client.policies.generate(INSTRUCTIONS, system_model_key="gpt")
    assert fake_llm.last.headers["x-api-key"] == API_KEY
    assert fake_llm.last.body["model"] == "claude-haiku-4-5"
    assert draft.drafted_with.source == "system"
    assert (draft.drafted_with.system_model_key, draft.drafted_with.name) == ("house", "house")
    assert draft.rule_text == REPLY
    assert "ORGDECK_SYSTEM_MODEL_GPT_API_KEY" in unavailable.value.message


# -- saved policies -----------------------------------------------------------------------


def test_save_a_draft_as_a_policy(client):
    draft = client.policies.generate(INSTRUCTIONS, category="quality")
    policy = client.policies.create(
        draft.name,
        draft.rule_text,
        category=draft.category,
        severity="warning",
        drafted_with="builtin-template",
    )
    assert policy.id.startswith("pol_")
    assert (policy.name, policy.category, policy.severity, policy.version) == (
        "Do not log customer PII",
        "quality",
        "warning",
        1,
    )
    assert policy.drafted_with == "builtin-template"
    # Saved as a warning though drafted as an error: the header line says so.
    saved_text = draft.rule_text.replace(
        "Severity: error (a violation blocks the action)",
        "Severity: warning (a violation is reported; the action goes ahead)",
    )
    assert [(v.version, v.rule_text) for v in policy.versions] == [(1, saved_text)]
    assert client.policies.get(policy.id) == policy


def test_edits_keep_previous_texts_as_versions(client):
    policy = client.policies.create("Secrets", "1. MUST NOT log secrets.")
    edited = client.policies.update(policy.id, rule_text="1. MUST NOT log or print secrets.")
    assert edited.version == 2
    assert edited.rule_text == "1. MUST NOT log or print secrets."
    assert [(v.version, v.rule_text) for v in edited.versions] == [
        (2, "1. MUST NOT log or print secrets."),
        (1, "1. MUST NOT log secrets."),
    ]
    same = client.policies.update(policy.id, rule_text="1. MUST NOT log or print secrets.")
    assert same.version == 2 and len(same.versions) == 2  # nothing changed, no version
    reclassified = client.policies.update(policy.id, severity="warning", description="Found in review")
    assert reclassified.version == 3
    assert (reclassified.versions[0].severity, reclassified.versions[1].severity) == ("warning", "error")
    assert client.policies.get(policy.id).versions == reclassified.versions


def test_a_rename_or_reclassification_follows_into_the_drafted_header_lines(client):
    draft = client.policies.generate(INSTRUCTIONS, category="quality")
    policy = client.policies.create(draft.name, draft.rule_text, category="quality")
    assert f"Title: {draft.name}\nCategory: quality · Severity: error (" in policy.rule_text
    renamed = client.policies.update(policy.id, name="No PII in logs", severity="warning")
    assert renamed.version == 2
    assert "Title: No PII in logs\nCategory: quality · Severity: warning (" in renamed.rule_text
    assert draft.name not in renamed.rule_text
    assert renamed.rule_text.split("\n")[2:] == policy.rule_text.split("\n")[2:]  # the rest untouched
    assert renamed.versions[1].rule_text == policy.rule_text  # the old text stays in its version
    # Lines the author rewrote are theirs: a rename leaves them as they are.
    rewritten = renamed.rule_text.replace("Title: No PII in logs", "Title: Personal data stays out of logs")
    client.policies.update(policy.id, rule_text=rewritten)
    again = client.policies.update(policy.id, name="PII")
    assert "Title: Personal data stays out of logs" in again.rule_text
    # Both sent at once: the new text's title line follows the new name when it kept the old one.
    both = client.policies.update(policy.id, name="Logs", rule_text="Title: PII\n1. MUST NOT log PII.")
    assert both.rule_text == "Title: Logs\n1. MUST NOT log PII."


def test_a_draft_saved_under_another_name_or_class_states_them_in_its_header_lines(client):
    draft = client.policies.generate(INSTRUCTIONS)  # drafted as security, error
    policy = client.policies.create(
        "Personal data stays out of logs", draft.rule_text, category="compliance", severity="warning"
    )
    assert policy.rule_text.startswith(
        "Title: Personal data stays out of logs\nCategory: compliance · Severity: warning ("
    )
    assert policy.rule_text.split("\n")[2:] == draft.rule_text.split("\n")[2:]
    # Text without those lines is saved as written.
    plain_rule = client.policies.create("Plain", "1. MUST be plain.", severity="warning")
    assert plain_rule.rule_text == "1. MUST be plain."


def test_search_finds_policies_by_part_of_the_name_in_any_case(client, http, org):
    for name in ("Customer PII", "Outbound TLS", "PII in prompts", "100% coverage"):
        client.policies.create(name, "1. MUST hold.")
    assert [p.name for p in client.policies.list(search="pii").items] == ["PII in prompts", "Customer PII"]
    assert [p.name for p in client.policies.list(search="  tls ").items] == ["Outbound TLS"]
    assert [p.name for p in client.policies.list(search="%").items] == ["100% coverage"]  # not a wildcard
    assert client.policies.list(search="pii", category="identity").total == 0
    too_long = http.get(
        "governance/policies", params={"orgSlug": org.slug, "search": "x" * 201}, headers=org.headers
    )
    assert too_long.status_code == 400 and too_long.json()["details"][0]["field"] == "search"


def test_names_are_unique_and_failures_write_nothing(client, db, http, org):
    client.policies.create("Unique", "1. MUST be unique.")
    other = client.policies.create("Other", "1. MUST differ.")
    versions_before = count_rows(db, "governance_policy_versions")
    for attempt in (
        lambda: client.policies.create("Unique", "1. MUST clash."),
        lambda: client.policies.update(other.id, name="Unique", rule_text="changed"),
    ):
        with pytest.raises(BadRequest) as error:
            attempt()
        assert error.value.code == "already_exists"
    assert count_rows(db, "governance_policy_versions") == versions_before
    assert client.policies.get(other.id).rule_text == "1. MUST differ."
    nulled = http.patch(
        f"governance/policies/{other.id}", headers=org.headers, json={"orgSlug": org.slug, "ruleText": None}
    )
    assert nulled.status_code == 400
    assert nulled.json()["details"][0]["field"] == "ruleText"


def test_list_filters_and_pages(client, http, org):
    for name, category, severity in [
        ("a", "security", "error"),
        ("b", "security", "warning"),
        ("c", "quality", "error"),
        ("d", "identity", "warning"),
    ]:
        client.policies.create(name, f"1. MUST {name}.", category=category, severity=severity)
    assert [p.name for p in client.policies.list().items] == ["d", "c", "b", "a"]  # newest first
    assert [p.name for p in client.policies.list(category="security").items] == ["b", "a"]
    assert [p.name for p in client.policies.list(category="security", severity="error").items] == ["a"]
    page = client.policies.list(limit=2, offset=1)
    assert ([p.name for p in page.items], page.total, page.limit, page.offset) == (["c", "b"], 4, 2, 1)
    for params, field in [
        ({"category": "privacy"}, "category"),
        ({"limit": 0}, "limit"),
        ({"limit": 1001}, "limit"),
    ]:
        answer = http.get("governance/policies", params={"orgSlug": org.slug, **params}, headers=org.headers)
        assert answer.status_code == 400, answer.text
        assert answer.json()["details"][0]["field"] == field
    assert (
        "'security', 'quality', 'compliance' or 'identity'"
        in http.get(
            "governance/policies", params={"orgSlug": org.slug, "category": "privacy"}, headers=org.headers
        ).json()["message"]
    )


def test_delete_and_another_orgs_policy(client, server, other_org):
    with OrgdeckClient(server.url, other_org.key, org_slug=other_org.slug) as other:
        theirs = other.policies.create("Theirs", "1. MUST stay theirs.")
    for attempt in (
        lambda: client.policies.get(theirs.id),
        lambda: client.policies.update(theirs.id, rule_text="mine"),
        lambda: client.policies.delete(theirs.id),
    ):
        with pytest.raises(NotFound):
            attempt()
    mine = client.policies.create("Mine", "1. MUST go.")
    assert client.policies.delete(mine.id).id == mine.id
    with pytest.raises(NotFound):
        client.policies.get(mine.id)
    with OrgdeckClient(server.url, other_org.key, org_slug=other_org.slug) as other:
        assert other.policies.get(theirs.id).rule_text == "1. MUST stay theirs."


def test_demo_seed_is_idempotent(client):
    seed_governance(client)
    seed_governance(client)
    policies = client.policies.list().items
    assert sorted(p.name for p in policies) == sorted(name for name, *_ in DEMO_POLICIES)
    assert {p.category for p in policies} == {"security", "quality", "compliance", "identity"}
    assert all("MUST" in p.rule_text and p.drafted_with == "Built-in template drafter" for p in policies)
    [example] = client.providers.list().items
    assert (example.name, example.kind, example.api_key_set) == (EXAMPLE_PROVIDER, "openai_compatible", False)

"""Drafting tested checks: the built-in drafter's common asks, and model drafts checked before they
are answered (retried once with what failed)."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from api import OrgdeckClient
from api.governance import GeneratePolicyPrompt, PolicyDraft
from service.governance.checks import compile_check, run_check
from service.governance.drafting import builtin_checked_draft
from tests.fake_llm import LOGGING_CHECK, REPLY, FakeLLM, drafted, running_fake_llm
from tests.test_deployments import versioned_agent

AGENT = {
    "stableKey": "support-triage",
    "name": "Support triage",
    "provider": "openai",
    "model": "gpt-4o",
    "providerConfig": {"model": "gpt-4o", "temperature": 0.2, "max_tokens": 1024},
    "tags": ["support", "owner:support-team"],
    "tools": [{"ref": "kb.search"}],
    "prompts": [],
}


def subject(environment: str = "production", **agent: Any) -> dict[str, Any]:
    """A realistic CEL input: the support agent as deployed, with `agent` fields changed."""
    config = {**AGENT["providerConfig"], **agent.pop("providerConfig", {})}
    return {
        "agent": {**copy.deepcopy(AGENT), "providerConfig": config, **agent},
        "environment": {"name": environment, "protected": environment == "production", "target": "webhook"},
        "deployment": {"actor": "ops@example.com", "viaChangeRequest": False, "action": "deploy"},
    }


def outcome(draft: PolicyDraft, input: dict[str, Any]) -> str:
    assert draft.check is not None
    return run_check(compile_check(draft.check), input).outcome


def assert_examples_hold(draft: PolicyDraft) -> None:
    """The draft's check compiles and each of its examples has the outcome it expects."""
    assert draft.check is not None, draft.notice
    compiled = compile_check(draft.check)
    assert {example.expect for example in draft.examples} == {"pass", "fail"}
    for example in draft.examples:
        assert run_check(compiled, example.input).outcome == example.expect, example.name


# -- the built-in drafter -----------------------------------------------------------------

COMMON_ASKS = [
    pytest.param(
        "Agents must not use gpt-3.5.",
        [subject(model="gpt-3.5-turbo"), subject(model="gpt-3.5")],
        [subject(), subject(model="gpt-4o-mini")],
        id="model deny list",
    ),
    pytest.param(
        "Agents may only use gpt-4o or claude-3-5-sonnet.",
        [subject(model="gemini-1.5-pro"), subject(model="gpt-3.5-turbo")],
        [subject(), subject(model="claude-3-5-sonnet-20241022", provider="anthropic")],
        id="model allow list",
    ),
    pytest.param(
        "Keep temperature ≤ 0.3",
        [subject(providerConfig={"temperature": 0.9}), subject(providerConfig={"temperature": 0.31})],
        [subject(providerConfig={"temperature": 0.3}), subject(providerConfig={"temperature": 0})],
        id="temperature cap",
    ),
    pytest.param(
        "Temperature must be below 0.5.",
        [subject(providerConfig={"temperature": 0.5})],
        [subject(providerConfig={"temperature": 0.49})],
        id="temperature cap, strict",
    ),
    pytest.param(
        "Max tokens must be at most 4096.",
        [subject(providerConfig={"max_tokens": 8192})],
        [subject(providerConfig={"max_tokens": 4096})],
        id="max-token cap",
    ),
    pytest.param(
        "Answers of no more than 2,000 tokens.",
        [subject(providerConfig={"max_tokens": 2001})],
        [subject(providerConfig={"max_tokens": 2000})],
        id="max-token cap, number first",
    ),
    pytest.param(
        "Agents must never call the shell.exec or stripe.refund tools.",
        [
            subject(tools=[{"ref": "kb.search"}, {"ref": "stripe.refund"}]),
            subject(tools=[{"ref": "shell.exec"}]),
        ],
        [subject(), subject(tools=[])],
        id="tool deny list",
    ),
    pytest.param(
        "Every agent must be tagged owner.",
        [subject(tags=["support"]), subject(tags=[])],
        [subject(), subject(tags=["owner"])],
        id="required tag",
    ),
    pytest.param(
        "Agents must not be tagged experimental.",
        [subject(tags=["support", "experimental"])],
        [subject()],
        id="forbidden tag",
    ),
]


@pytest.mark.parametrize(("instructions", "breaking", "complying"), COMMON_ASKS)
def test_each_common_ask_drafts_a_check_its_examples_hold(client, instructions, breaking, complying):
    draft = client.policies.generate(instructions)
    assert_examples_hold(draft)
    assert [outcome(draft, input) for input in breaking] == ["fail"] * len(breaking)
    assert [outcome(draft, input) for input in complying] == ["pass"] * len(complying)
    assert draft.enforcement == "deny"  # severity error, examples passing
    assert draft.message and draft.message.startswith("Must")
    assert draft.scope.environments.match == "all"


def test_providers_per_environment_scope_the_policy_to_the_environment(client):
    draft = client.policies.generate("Production agents only use azure.")
    assert_examples_hold(draft)
    assert draft.scope.environments.model_dump() == {"match": "names", "names": ["production"]}
    assert outcome(draft, subject(provider="openai")) == "fail"
    assert outcome(draft, subject(provider="azure_openai")) == "pass"
    assert "Scope: Every agent deployed to production." in draft.rule_text


def test_providers_that_differ_by_environment_hold_each_in_its_own(client):
    instructions = (
        "Production agents only use azure and keep temperature ≤ 0.3; staging agents only use openai."
    )
    draft = client.policies.generate(instructions)
    assert_examples_hold(draft)
    assert draft.scope.environments.names == ["production", "staging"]
    assert "1. In production: MUST use only the provider azure_openai." in draft.rule_text
    assert "3. In staging: MUST use only the provider openai." in draft.rule_text
    assert outcome(draft, subject(provider="azure_openai")) == "pass"
    assert outcome(draft, subject(provider="openai")) == "fail"
    assert outcome(draft, subject(provider="azure_openai", providerConfig={"temperature": 0.9})) == "fail"
    assert (
        outcome(draft, subject("staging", provider="openai", providerConfig={"temperature": 0.9})) == "pass"
    )
    assert outcome(draft, subject("staging", provider="azure_openai")) == "fail"
    assert {e.input["environment"]["name"] for e in draft.examples if e.expect == "pass"} == {
        "production",
        "staging",
    }


def test_an_ask_naming_no_environment_beside_one_that_does_holds_everywhere(client):
    draft = client.policies.generate("Agents must not use gpt-3.5. In production, temperature ≤ 0.3.")
    assert_examples_hold(draft)
    assert draft.scope.environments.match == "all"
    assert outcome(draft, subject("staging", model="gpt-3.5-turbo")) == "fail"
    assert outcome(draft, subject("staging", providerConfig={"temperature": 0.9})) == "pass"
    assert outcome(draft, subject(providerConfig={"temperature": 0.9})) == "fail"


def test_protected_environments_scope_the_policy_to_them(client):
    draft = client.policies.generate("In protected environments agents must not use openai.")
    assert draft.scope.environments.match == "protected"
    assert outcome(draft, subject(provider="openai")) == "fail"
    assert outcome(draft, subject(provider="anthropic")) == "pass"


def test_the_issues_combined_ask_is_one_check(client):
    instructions = "Production agents must not use gpt-3.5 and must keep temperature ≤ 0.3"
    draft = client.policies.generate(instructions, severity="warning")
    assert_examples_hold(draft)
    assert draft.check is not None and " && " in draft.check
    assert draft.scope.environments.names == ["production"]
    assert draft.enforcement == "warn"
    assert [example.name for example in draft.examples if example.expect == "fail"] == [
        "uses gpt-3.5",
        "temperature 0.9",
    ]
    assert outcome(draft, subject(model="gpt-3.5-turbo", providerConfig={"temperature": 0.9})) == "fail"
    assert outcome(draft, subject(model="gpt-3.5-turbo")) == "fail"
    assert outcome(draft, subject(providerConfig={"temperature": 0.9})) == "fail"
    assert outcome(draft, subject()) == "pass"
    assert (
        "1. MUST NOT use the model gpt-3.5 (or a version of it).\n2. MUST keep temperature at or below 0.3."
        in (draft.rule_text)
    )


def test_a_missing_setting_breaks_a_cap(client):
    draft = client.policies.generate("Temperature at most 0.3. Max tokens at most 1000.")
    bare = subject()
    bare["agent"]["providerConfig"] = {"model": "gpt-4o"}
    assert outcome(draft, bare) == "fail"  # the provider's default temperature is 1


def test_what_is_not_recognised_is_kept_and_said(client):
    draft = client.policies.generate("Agents must not use gpt-3.5. Never log customer PII.")
    assert_examples_hold(draft)
    assert "2. MUST NOT log customer PII." in draft.rule_text
    assert draft.notice is not None and "“Never log customer PII”" in draft.notice


TEMPERATURE = "has(agent.providerConfig.temperature) && agent.providerConfig.temperature"
MAX_TOKENS = "has(agent.providerConfig.max_tokens) && agent.providerConfig.max_tokens"


@pytest.mark.parametrize(
    ("instructions", "check"),
    [
        ("Temperature must not exceed 0.3.", f"{TEMPERATURE} <= 0.3"),
        ("A temperature of 0.3 or less.", f"{TEMPERATURE} <= 0.3"),
        ("Max temperature 0.7", f"{TEMPERATURE} <= 0.7"),
        ("temperature < 1", f"{TEMPERATURE} < 1"),
        ("Max tokens under 4000.", f"{MAX_TOKENS} < 4000"),  # the words next to the number decide
        ("max_tokens <= 512", f"{MAX_TOKENS} <= 512"),
        (
            "Never use the `shell` tool or the web_search tool.",
            '!agent.tools.exists(t, t.ref in ["web_search", "shell"])',
        ),
        (
            "Agents must have the tags owner and cost-center.",
            'agent.tags.exists(t, t == "owner" || t.startsWith("owner:")) && agent.tags.exists(t, t == "cost-center" || t.startsWith("cost-center:"))',
        ),
        ("No agent may use phi-3.", '!(agent.model == "phi-3" || agent.model.startsWith("phi-3-"))'),
        ("Agents must not use openai or azure openai.", '!(agent.provider in ["openai", "azure_openai"])'),
    ],
)
def test_phrasings(instructions, check):
    draft = builtin_checked_draft(GeneratePolicyPrompt(org_slug="x", instructions=instructions))
    assert draft.check == check
    assert draft.tested


@pytest.mark.parametrize(
    "instructions",
    [
        "Never send PHI to external tools.",  # PHI is health data, not a model
        "Never send customer emails to third-party tools.",  # a kind of tools, not one
        "Agents must not use more than 3 tools.",  # a count, not a tool
        "At this stage, agents with tags must be reviewed.",  # neither an environment nor a tag
        "Temperature at least 0.1.",  # a lower bound
        "Never send customer data to example.com.",  # a domain, not a tool
    ],
)
def test_words_that_only_look_like_an_ask_draft_no_check(instructions):
    draft = builtin_checked_draft(GeneratePolicyPrompt(org_slug="x", instructions=instructions))
    assert draft.check is None
    assert draft.scope.environments.match == "all"
    assert draft.notice is not None and "No check drafted" in draft.notice


def test_nothing_recognised_is_a_draft_without_check_saying_so(http, org):
    answer = http.post(
        "governance/policies/generate-prompt",
        headers=org.headers,
        json={"orgSlug": org.slug, "instructions": "Be kind to customers."},
    )
    assert answer.status_code == 200, answer.text
    draft = answer.json()
    assert (draft["check"], draft["message"], draft["enforcement"], draft["examples"]) == (
        None,
        None,
        None,
        [],
    )
    assert "No check drafted" in draft["notice"]
    assert "1. MUST be kind to customers." in draft["ruleText"]


# -- drafting with a model ----------------------------------------------------------------


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    with running_fake_llm() as fake:
        yield fake


@pytest.fixture
def provider_id(client: OrgdeckClient, fake_llm: FakeLLM) -> str:
    values = {"base_url": f"{fake_llm.url}/v1", "api_key": "sk-drafting-0123456789abcdef", "models": ["m"]}
    return client.providers.create("Drafting model", "openai_compatible", **values).id


def test_a_model_draft_whose_examples_pass_is_answered_at_once(client, fake_llm, provider_id):
    fake_llm.reply = drafted()
    draft = client.policies.generate("Agents must not write logs.", provider_id=provider_id)
    assert len(fake_llm.requests) == 1
    assert (draft.rule_text, draft.check, draft.message) == (REPLY, LOGGING_CHECK, "Writes logs.")
    assert [example.expect for example in draft.examples] == ["pass", "fail"]
    assert_examples_hold(draft)
    assert (draft.enforcement, draft.notice) == ("deny", None)
    system = fake_llm.last.body["messages"][0]["content"]
    assert '"ruleText"' in system and '"providerConfig"' in system


def test_a_check_that_does_not_compile_is_asked_for_again_with_the_error(client, fake_llm, provider_id):
    fake_llm.replies = [drafted(check="agent.model ==")]
    fake_llm.reply = drafted()
    draft = client.policies.generate("Agents must not write logs.", provider_id=provider_id)
    assert len(fake_llm.requests) == 2
    retry = fake_llm.last.body["messages"][1]["content"]
    assert "Your previous answer:" in retry and "agent.model ==" in retry
    assert "does not compile" in retry and "line 1, column" in retry
    assert (draft.check, draft.notice, draft.enforcement) == (LOGGING_CHECK, None, "deny")
    assert draft.usage is not None and draft.usage.total_tokens == 2 * 165  # both calls


def test_a_check_that_fails_twice_is_answered_with_a_notice(client, fake_llm, provider_id):
    fake_llm.reply = drafted(check="agent.model ==")
    draft = client.policies.generate("Agents must not write logs.", provider_id=provider_id)
    assert len(fake_llm.requests) == 2
    assert draft.notice is not None and "does not compile" in draft.notice
    assert (draft.rule_text, draft.check) == (REPLY, "agent.model ==")  # for the author to fix
    assert draft.enforcement == "audit"


def test_examples_that_fail_are_asked_for_again_and_reported(client, fake_llm, provider_id):
    wrong = json.loads(drafted())["examples"]
    wrong[1]["expect"] = "pass"  # the logging agent is said to comply
    fake_llm.reply = drafted(examples=wrong)
    draft = client.policies.generate("Agents must not write logs.", provider_id=provider_id)
    assert len(fake_llm.requests) == 2
    assert (
        "example 'writes logs' expects pass but the check gives fail"
        in fake_llm.last.body["messages"][1]["content"]
    )
    assert draft.notice is not None and "example 'writes logs' expects pass" in draft.notice
    assert "one expected pass and one expected fail" in draft.notice
    assert draft.enforcement == "audit"


@pytest.mark.parametrize(
    ("garbage", "says"),
    [
        ("I cannot help with that.", "not a JSON object"),
        ('{"ruleText": "Title: x", "check": }', "not valid JSON"),
        ('{"check": "true"}', "ruleText is missing"),
        (
            json.dumps({"ruleText": "Rules: 1. MUST be nice.", "check": "true", "examples": "none"}),
            "an example",
        ),
    ],
)
def test_garbage_is_answered_as_a_draft_with_a_notice_not_an_error(
    client, fake_llm, provider_id, garbage, says
):
    fake_llm.reply = garbage
    draft = client.policies.generate("Agents must not write logs.", provider_id=provider_id)
    assert len(fake_llm.requests) == 2
    assert draft.notice is not None and says in draft.notice
    assert draft.examples == []
    assert draft.rule_text.strip()


# -- from plain words to a refused deployment ---------------------------------------------


SAVED_FROM_THE_DRAFT = ("name", "ruleText", "check", "message", "enforcement", "scope", "examples")


def test_a_drafted_policy_saved_as_drafted_refuses_what_it_forbids(http, org, client):
    production = client.environments.create("production").id
    staging = client.environments.create("staging").id
    versioned_agent(client, "legacy", model="gpt-3.5-turbo", temperature=0.9)
    versioned_agent(client, "current")
    draft = client.policies.generate("Production agents must not use gpt-3.5 and must keep temperature ≤ 0.3")
    drafted_fields = draft.model_dump(by_alias=True, mode="json")
    saved = http.post(
        "governance/policies",
        headers=org.headers,
        json={
            "orgSlug": org.slug,
            **{key: drafted_fields[key] for key in SAVED_FROM_THE_DRAFT},
        },
    )
    assert saved.status_code == 200, saved.text
    assert saved.json()["enforcement"] == "deny"
    assert [result["passed"] for result in saved.json()["exampleResults"]] == [True, True, True]

    def deploy(environment_id: str, *keys: str) -> httpx.Response:
        body = {"orgSlug": org.slug, "environmentId": environment_id, "agentStableKeys": list(keys)}
        return http.post("agents/deployments", json=body, headers=org.headers)

    refused = deploy(production, "legacy", "current")
    assert refused.status_code == 403, refused.text
    assert [(d["agent"], d["message"]) for d in refused.json()["details"]] == [("legacy", draft.message)]
    assert deploy(production, "current").status_code == 200
    assert deploy(staging, "legacy").status_code == 200  # out of the drafted scope

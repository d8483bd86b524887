from __future__ import annotations

from collections.abc import Iterator

import pytest

from api import OrgdeckClient
from tests.console.conftest import select_row, texts
from tests.fake_llm import REPLY, FakeLLM, drafted, running_fake_llm

PAGE = "pages/governance.py"
INSTRUCTIONS = "Never log customer PII. Always use TLS for outbound calls."


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    with running_fake_llm() as fake:
        fake.reply = drafted(REPLY)
        yield fake


def org_client(server, org) -> OrgdeckClient:
    return OrgdeckClient(server.url, org.key, org_slug=org.slug)


def versions(app):
    """The versions table of the chosen policy (the one with a Saved column)."""
    return next(table.value for table in app.dataframe if "Saved" in table.value)


def click(app, label: str) -> None:
    next(b for b in app.button if b.label == label).click().run()
    assert not app.exception, app.exception


def test_empty_state(console):
    app = console(PAGE)
    assert "No policies yet" in texts(app)
    assert "The draft appears here" in texts(app)
    assert app.radio(key="draft_source").value == "system"


def test_draft_edit_save_with_the_builtin_drafter(console, server, org):
    app = console(PAGE)
    app.text_area(key="draft_instructions").input(INSTRUCTIONS)
    app.selectbox(key="draft_category").select("compliance")
    click(app, "Generate draft")
    draft = app.text_area(key="draft_text").value
    assert "1. MUST NOT log customer PII." in draft
    assert "2. MUST use TLS for outbound calls." in draft
    assert "Drafted by the built-in template drafter: no language model was called" in texts(app)
    assert app.text_input(key="draft_title").value == "Do not log customer PII"

    edited = draft + "\n\nReviewed by the security team."
    app.text_area(key="draft_text").input(edited)
    app.text_input(key="draft_title").input("Customer data in logs")
    click(app, "Save as policy")
    assert "Saved policy **Customer data in logs** as version 1." in texts(app)
    with org_client(server, org) as orgdeck:
        [saved] = orgdeck.policies.list().items
    # Saved under another name than drafted: the rule's Title line says the name it was saved as.
    retitled = edited.replace("Title: Do not log customer PII", "Title: Customer data in logs")
    assert (saved.name, saved.rule_text, saved.category) == ("Customer data in logs", retitled, "compliance")
    assert list(app.dataframe[0].value["Name"]) == ["Customer data in logs"]
    assert list(versions(app)["Version"]) == [1]  # the versions of the chosen policy


def test_draft_with_an_organizations_provider(console, server, org, fake_llm):
    with org_client(server, org) as orgdeck:
        orgdeck.providers.create(
            "Team vLLM", "openai_compatible", base_url=f"{fake_llm.url}/v1", models=["llama3.1", "qwen2.5"]
        )
    app = console(PAGE)
    app.text_area(key="draft_instructions").input(INSTRUCTIONS)
    app.radio(key="draft_source").set_value("custom").run()
    app.selectbox(key="draft_model").select("qwen2.5")
    click(app, "Generate draft")
    assert fake_llm.last.body["model"] == "qwen2.5"
    assert app.text_area(key="draft_text").value == REPLY
    assert app.text_input(key="draft_title").value == "Keep secrets out of logs"
    assert "Team vLLM" in texts(app) and "165 tokens" in texts(app)


def test_a_failing_provider_is_explained(console, server, org, fake_llm):
    fake_llm.behaviour = 401
    with org_client(server, org) as orgdeck:
        orgdeck.providers.create(
            "Team vLLM", "openai_compatible", base_url=f"{fake_llm.url}/v1", models=["m"]
        )
    app = console(PAGE)
    app.text_area(key="draft_instructions").input(INSTRUCTIONS)
    app.radio(key="draft_source").set_value("custom").run()
    click(app, "Generate draft")
    assert "Could not draft the policy" in texts(app)
    assert "provider 'Team vLLM' refused the API key" in texts(app)
    assert app.text_area(key="draft_instructions").value == INSTRUCTIONS


def test_edit_every_field_keeps_versions_and_finds_by_name(console, server, org):
    with org_client(server, org) as orgdeck:
        draft = orgdeck.policies.generate("Never log secrets.", name="Secrets")
        secrets = orgdeck.policies.create("Secrets", draft.rule_text, category="security")
        orgdeck.policies.create("Tone", "1. MUST be polite.", category="quality", severity="warning")
    app = console(PAGE)
    select_row(app, "policies_table", 1)  # newest first: Secrets is second
    key = f"policy_{secrets.id}_1"
    app.text_input(key=f"{key}_name").input("Secrets stay out of logs")
    app.selectbox(key=f"{key}_edit_category").select("compliance")
    app.selectbox(key=f"{key}_edit_severity").select("warning")
    app.text_input(key=f"{key}_edit_description").input("From the audit")
    click(app, "Save as new version")
    assert "Saved **Secrets stay out of logs**, now at version 2." in texts(app)
    with org_client(server, org) as orgdeck:
        saved = orgdeck.policies.get(secrets.id)
    assert (saved.name, saved.category, saved.severity, saved.description) == (
        "Secrets stay out of logs",
        "compliance",
        "warning",
        "From the audit",
    )
    # The rule text's own title and classification follow: no old "Title: Secrets" left behind.
    assert "Title: Secrets stay out of logs\nCategory: compliance · Severity: warning" in saved.rule_text
    assert app.text_area(key=f"policy_{secrets.id}_2_text").value == saved.rule_text
    assert list(versions(app)["Version"]) == [2, 1]
    assert "+Title: Secrets stay out of logs" in app.code[-1].value

    app.text_input(key="search").input("LOGS").run()
    assert list(app.dataframe[0].value["Name"]) == ["Secrets stay out of logs"]
    app.text_input(key="search").input("").run()
    app.selectbox(key="category").select("quality").run()
    assert list(app.dataframe[0].value["Name"]) == ["Tone"]


def test_policy_fields_show_their_limits_before_saving(console, server, org):
    with org_client(server, org) as orgdeck:
        policy = orgdeck.policies.create("Tone", "1. MUST be polite.")
    app = console(PAGE)
    # Said in the help, not enforced by the browser (which would drop a longer paste).
    assert "At most 20,000 characters." in app.text_area(key="draft_instructions").help
    assert "at most 50,000 characters" in app.text_area(key=f"policy_{policy.id}_1_text").help
    assert "at most 200 characters" in app.text_input(key=f"policy_{policy.id}_1_name").help


def test_empty_instructions_are_explained_in_words_next_to_the_field(console):
    app = console(PAGE)
    click(app, "Generate draft")
    assert [e.value for e in app.error] == [
        "Instructions is required: at least one sentence, at most 20,000 characters, e.g. Never log customer PII."
    ]

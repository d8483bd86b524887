"""The Try tab: variables filled in, the rendered text, a run on a provider of the organization (the
loopback fake model) and a second version side by side on the same values."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from api import OrgdeckClient
from tests.console.conftest import select_row, texts
from tests.fake_llm import FakeLLM, running_fake_llm

PAGE = "pages/registries.py"


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    with running_fake_llm() as fake:
        yield fake


@pytest.fixture
def seeded(server, org, fake_llm) -> str:
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as orgdeck:
        ref = orgdeck.registries.create("support").registry_ref
        orgdeck.registries.publish(ref, "triage", "Triage for {{company}}: {{ticket}}")
        orgdeck.registries.publish(ref, "triage", "Triage for {{company}}, priority first: {{ticket}}")
        orgdeck.providers.create(
            "Team models", "openai_compatible", base_url=f"{fake_llm.url}/v1", models=["llama3.1:8b"]
        )
    return ref


def opened_try_tab(console, ref: str):
    app = console(PAGE)
    select_row(app, "registries_table", list(app.dataframe[0].value["Registry"]).index(ref))
    return app


def fill(app, ref: str, **values: str) -> None:
    for name, value in values.items():
        app.text_input(key=f"try_variable:{ref}:triage:{name}").input(value)
    app.run()


def run_button(app):
    return next(b for b in app.button if b.label in {"Run", "Run both"})


def test_variables_render_the_text_and_a_run_shows_answer_tokens_and_latency(console, seeded, fake_llm):
    app = opened_try_tab(console, seeded)
    assert "Triage for <mark" in texts(app)  # not filled in yet: the variables stay marked
    fill(app, seeded, company="Acme", ticket="Checkout is down")
    assert "Triage for Acme, priority first: Checkout is down" in texts(app)
    run_button(app).click().run()
    assert not app.exception
    assert (
        fake_llm.last.body["messages"][-1]["content"] == "Triage for Acme, priority first: Checkout is down"
    )
    assert fake_llm.reply in [element.value for element in app.text]
    assert "llama3.1:8b-2025-01-01 · 120 in · 45 out · 165 tokens ·" in texts(app)
    assert " ms" in texts(app)


def test_compare_with_runs_both_versions_on_the_same_values(console, seeded, fake_llm):
    app = opened_try_tab(console, seeded)
    app.selectbox(key=f"try_other:{seeded}:triage").select("1").run()
    fill(app, seeded, company="Acme", ticket="Refund")
    button = run_button(app)
    assert button.label == "Run both"
    button.click().run()
    assert not app.exception
    assert [request.body["messages"][-1]["content"] for request in fake_llm.requests] == [
        "Triage for Acme, priority first: Refund",
        "Triage for Acme: Refund",
    ]
    assert "**Version 2**" in texts(app) and "**Version 1**" in texts(app)
    assert [element.value for element in app.text].count(fake_llm.reply) == 2


def test_an_empty_variable_and_a_failing_provider_say_why_beside_the_version(console, seeded, fake_llm):
    app = opened_try_tab(console, seeded)
    fill(app, seeded, company="Acme")
    run_button(app).click().run()
    assert "Could not run version 2" in texts(app) and "ticket" in texts(app)
    assert fake_llm.requests == []
    fill(app, seeded, ticket="Refund")
    fake_llm.behaviour = 500
    run_button(app).click().run()
    assert not app.exception
    assert "failed (HTTP 500)" in texts(app)


def test_a_changed_value_marks_the_answer_as_of_earlier_values(console, seeded, fake_llm):
    app = opened_try_tab(console, seeded)
    fill(app, seeded, company="Acme", ticket="Refund")
    run_button(app).click().run()
    assert "Answered on earlier values" not in texts(app)
    fill(app, seeded, ticket="Outage")
    assert "Answered on earlier values" in texts(app)


def test_without_providers_the_run_is_disabled_and_says_why(console, server, org):
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as orgdeck:
        ref = orgdeck.registries.create("support").registry_ref
        orgdeck.registries.publish(ref, "triage", "Hello")
    app = opened_try_tab(console, ref)
    assert "No provider connections yet" in texts(app)
    button = run_button(app)
    assert button.disabled and button.help == "Choose a model to run on."

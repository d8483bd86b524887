from __future__ import annotations

from collections.abc import Iterator

import pytest

from api import OrgdeckClient
from tests.console.conftest import texts
from tests.fake_llm import REPLY, FakeLLM, running_fake_llm

PAGE = "pages/providers.py"
API_KEY = "sk-console-0123456789abcdefWXYZ"


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    with running_fake_llm() as fake:
        yield fake


def org_client(server, org) -> OrgdeckClient:
    return OrgdeckClient(server.url, org.key, org_slug=org.slug)


def click(app, label: str) -> None:
    next(b for b in app.button if b.label == label).click().run()
    assert not app.exception, app.exception


def test_empty_state_lists_the_builtin_drafter(console):
    app = console(PAGE)
    assert "No provider connections yet" in texts(app)
    assert list(app.dataframe[0].value["Key"]) == ["builtin-template"]


def test_add_a_provider_and_never_see_its_key(console, server, org, fake_llm):
    app = console(PAGE)
    app.text_input[0].input("Team vLLM")
    app.selectbox[0].select("openai_compatible")
    app.text_input[1].input(f"{fake_llm.url}/v1")
    app.text_input[2].input(API_KEY)
    app.text_input[3].input("llama3.1, qwen2.5")
    click(app, "Add provider")
    assert "Added **Team vLLM**" in texts(app)
    table = app.dataframe[0].value
    assert list(table["Name"]) == ["Team vLLM"]
    assert list(table["API key"]) == ["…WXYZ"]
    assert API_KEY not in table.to_csv() + texts(app)
    with org_client(server, org) as orgdeck:
        [provider] = orgdeck.providers.list().items
    assert (provider.models, provider.default_model) == (["llama3.1", "qwen2.5"], "llama3.1")


def test_test_connection_shows_the_result(console, server, org, fake_llm):
    with org_client(server, org) as orgdeck:
        orgdeck.providers.create(
            "Team vLLM",
            "openai_compatible",
            base_url=f"{fake_llm.url}/v1",
            api_key=API_KEY,
            models=["llama3.1"],
        )
    app = console(PAGE)
    click(app, "Test connection")
    assert "Connected" in texts(app)
    assert REPLY in texts(app)
    assert fake_llm.last.headers["authorization"] == f"Bearer {API_KEY}"
    fake_llm.behaviour = 429
    click(app, "Test connection")
    assert "Test failed** (provider_rate_limited)" in texts(app)
    assert "rate limiting requests" in texts(app)


def test_a_missing_base_url_is_said_next_to_it_and_the_form_kept(console, server, org):
    app = console(PAGE)
    app.text_input(key="new_provider_name").input("Azure")
    app.selectbox(key="new_provider_kind").select("azure_openai")
    app.text_input(key="new_provider_models").input("gpt-4o")
    click(app, "Add provider")
    [said] = [e.value for e in app.error]
    assert said.startswith("Base URL: Azure OpenAI needs one.")
    assert app.text_input(key="new_provider_name").value == "Azure"
    assert app.text_input(key="new_provider_models").value == "gpt-4o"
    with org_client(server, org) as orgdeck:
        assert orgdeck.providers.list().items == []

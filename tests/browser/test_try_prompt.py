"""An author tries two versions of a prompt side by side against the loopback fake model, signed in
with their own key to a console of the test service, and sees both answers."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from api import OrgdeckClient
from tests.browser.conftest import assert_no_exception, click_row, go, open_page, settle, shoot
from tests.fake_llm import FakeLLM, running_fake_llm

pytestmark = pytest.mark.browser


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    with running_fake_llm() as fake:
        fake.reply = "P1: checkout is down for everyone."
        yield fake


def test_an_author_tries_two_versions_and_sees_both_answers(page, service_console_url, server, org, fake_llm):
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as admin:
        ref = admin.registries.create("try-prompts").registry_ref
        admin.registries.publish(ref, "triage", "Triage for {{company}}: {{ticket}}")
        admin.registries.publish(ref, "triage", "Triage for {{company}}, priority first: {{ticket}}")
        admin.providers.create(
            "Loopback models", "openai_compatible", base_url=f"{fake_llm.url}/v1", models=["llama3.1:8b"]
        )
        author = admin.members.create("ada@example.com", "Ada Author", "author")
        key = admin.api_keys.create("ada-browser", member_id=author.id).key
    open_page(page, service_console_url, "", "Not signed in")
    sidebar = page.locator("[data-testid=stSidebar]")
    sidebar.get_by_label("Your API key").fill(key)
    sidebar.get_by_role("button", name="Sign in").click()
    sidebar.get_by_text("Ada Author (ada@example.com)").wait_for(timeout=30_000)
    go(page, "Registries")
    click_row(page, page.locator("[data-testid=stDataFrame]").first, ref)
    page.get_by_role("tab", name="Try").click()
    settle(page)

    main = page.locator("[data-testid=stMain]")
    main.get_by_role("combobox", name="Compare with").click()
    page.get_by_role("option", name="1", exact=True).click()
    settle(page)
    main.get_by_role("textbox", name="company").fill("Acme")
    main.get_by_role("textbox", name="ticket").fill("Checkout is down")
    main.get_by_role("textbox", name="ticket").press("Enter")
    settle(page)
    main.get_by_text("Triage for Acme, priority first: Checkout is down").first.wait_for(timeout=30_000)
    main.get_by_role("button", name="Run both").click()
    settle(page)

    answers = main.get_by_text(fake_llm.reply)
    answers.nth(1).wait_for(timeout=30_000)
    assert answers.count() == 2
    assert main.get_by_text("165 tokens").count() == 2
    assert sorted(request.body["messages"][-1]["content"] for request in fake_llm.requests) == [
        "Triage for Acme, priority first: Checkout is down",
        "Triage for Acme: Checkout is down",
    ]
    assert_no_exception(page)
    shoot(page, "registries-try")

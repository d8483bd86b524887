"""Author → operator in headless Chromium: an author drafts a deny policy and saves it in their
console; the operator's deploy in theirs is refused with the policy's message; an exception the
operator grants lets it through; moving away and back between pages keeps each page working."""

from __future__ import annotations

import pytest

from api import OrgdeckClient
from service.governance.demo import DEMO_CHECKS
from tests.browser.conftest import (
    assert_no_exception,
    choose,
    go,
    open_page,
    running_console,
    settle,
    shoot,
)
from tests.test_deployments import versioned_agent, wait_for_end

pytestmark = pytest.mark.browser

INSTRUCTIONS = "Agents must not use gpt-3.5-turbo."


def preview(page, agent: str) -> None:
    page.get_by_role("tab", name="Deploy").click()
    choose(page.locator("[data-testid=stMain]"), "Agents", agent)
    page.get_by_role("button", name="Preview changes").click()
    page.get_by_text("Policy violations").wait_for(timeout=60_000)
    settle(page)


def test_author_denies_operator_is_refused_then_an_exception_lets_it_through(
    page, server, org, tmp_path, database_url
):
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as admin:
        versioned_agent(admin, "legacy-bot", model="gpt-3.5-turbo")
        admin.environments.create("staging")
        keys = {}
        for name, role in (("ada", "author"), ("otto", "operator")):
            member = admin.members.create(f"{name}@example.com", name.title(), role)
            keys[name] = admin.api_keys.create(f"{name}-key", member_id=member.id).key

    with running_console(tmp_path / "ada", database_url, server.url, keys["ada"]) as ada:
        open_page(page, ada, "governance", "Draft a policy")
        page.get_by_role("textbox", name="Instructions").fill(INSTRUCTIONS)
        page.get_by_role("button", name="Generate draft").click()
        page.get_by_text("Every example gives its expected outcome.").wait_for(timeout=60_000)
        check = page.get_by_role("textbox", name="Check (CEL)").first.input_value()
        assert "gpt-3.5-turbo" in check
        page.get_by_role("button", name="deny", exact=True).first.click()
        settle(page)
        shoot(page, "governance-deny-draft")
        page.get_by_role("button", name="Save as policy").click()
        page.get_by_text("as version 1").wait_for(timeout=60_000)
        assert_no_exception(page)

    with running_console(tmp_path / "otto", database_url, server.url, keys["otto"]) as otto:
        open_page(page, otto, "deployments", "Deployments")
        preview(page, "legacy-bot · v1")
        deploy = page.get_by_role("button", name="Deploy to staging")
        assert deploy.is_disabled()
        assert page.get_by_text("A deny policy refuses this deployment").count() >= 1
        shoot(page, "deployments-policy-refused")

        go(page, "Policies")
        page.get_by_text("Exceptions").first.wait_for(timeout=60_000)
        choose(page.locator("[data-testid=stMain]"), "Environment", "staging")
        page.get_by_role("textbox", name="Reason").fill("Migration to gpt-4o under way")
        page.get_by_role("button", name="Grant exception").click()
        page.get_by_text("Granted an exception").wait_for(timeout=60_000)
        assert_no_exception(page)
        shoot(page, "governance-exception")

        go(page, "Deployments")
        preview(page, "legacy-bot · v1")
        deploy = page.get_by_role("button", name="Deploy to staging")
        assert deploy.is_enabled()
        deploy.click()
        page.get_by_text("Deployed 1 agent").wait_for(timeout=60_000)
        assert_no_exception(page)

        go(page, "Policies")
        page.get_by_text("Compliance").first.wait_for(timeout=60_000)
        assert_no_exception(page)
        shoot(page, "governance-compliance")

    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as admin:
        (job, *_) = admin.deployments.jobs().items
        assert wait_for_end(admin, job.id).status == "complete"


def test_the_demo_shows_compliance_on_first_start(page, console_url):
    """The demo's two checked policies are its heatmap's rows (which cells are red depends on what the
    demo's worker has deployed; tests/test_policy_demo.py checks that with a worker)."""
    open_page(page, console_url, "governance", "Compliance")
    assert_no_exception(page)
    chart = page.locator("[data-testid=stPlotlyChart]")
    chart.first.wait_for(state="visible", timeout=30_000)  # drawn after the page's first rerun
    assert chart.count() == 1
    for name in DEMO_CHECKS:
        assert chart.get_by_text(name).count() >= 1
    shoot(page, "governance-compliance-demo")

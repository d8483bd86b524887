"""A promotion through a protected production in headless Chromium, on the shared console of the
test service: an operator sees a version waiting on the Promotion tab and requests its promotion,
a second operator approves it on Changes, the job runs, and the tab shows production on it."""

from __future__ import annotations

import pytest

from api import OrgdeckClient
from tests.browser.conftest import assert_no_exception, go, open_page, settle, shoot
from tests.test_deployments import versioned_agent, wait_for_end

pytestmark = pytest.mark.browser


def sign_in(page, console_url: str, key: str, name: str) -> None:
    open_page(page, console_url, "", "Not signed in")
    sidebar = page.locator("[data-testid=stSidebar]")
    sidebar.get_by_label("Your API key").fill(key)
    sidebar.get_by_role("button", name="Sign in").click()
    sidebar.get_by_text(name).wait_for(timeout=30_000)
    settle(page)


def promotion_tab(page):
    """The Deployments page's Promotion tab, reached through the menu, and its table."""
    go(page, "Deployments")
    page.get_by_role("tab", name="Promotion").click()
    settle(page)
    table = page.locator("[data-testid=stMain] table").first
    table.wait_for(timeout=60_000)
    return table


def test_an_operator_requests_a_promotion_another_approves_it_and_production_runs_it(
    page, service_console_url, server, org
):
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as admin:
        staging = admin.environments.create("staging").id
        production = admin.environments.create("production").id
        admin.environments.update(production, promotes_from=staging, production=True)
        versioned_agent(admin, "triage")
        versioned_agent(admin, "kb-answerer")
        for key in ("triage", "kb-answerer"):
            assert wait_for_end(admin, admin.deployments.deploy(staging, [key]).id).status == "complete"
        assert wait_for_end(admin, admin.deployments.promote(staging, production).id).status == "complete"
        admin.environments.update(production, protected=True, require_promotion=True, soak_minutes=0)
        admin.agents.update("triage", name="Triage two")
        admin.agents.snapshot("triage")
        assert wait_for_end(admin, admin.deployments.deploy(staging, ["triage"]).id).status == "complete"
        keys = {}
        for name in ("ana", "bo"):
            member = admin.members.create(f"{name}@example.com", name.title(), "operator")
            keys[name] = admin.api_keys.create(f"{name}-browser", member_id=member.id).key

    sign_in(page, service_console_url, keys["ana"], "Ana (ana@example.com)")
    table = promotion_tab(page)
    table.get_by_text("v2 waiting").wait_for(timeout=30_000)
    assert "protected · 1 approval" in table.inner_text()
    assert_no_exception(page)
    shoot(page, "promotion")
    page.get_by_role("button", name="Request promotion to production").click()
    page.get_by_text("production is protected").wait_for(timeout=60_000)
    reason = page.get_by_role("textbox", name="Reason")
    reason.fill("Triage two ran in staging")
    reason.press("Enter")
    settle(page)
    page.get_by_role("button", name="Request promotion now to production").click()
    page.get_by_text("Requested the promotion to").wait_for(timeout=60_000)
    page.get_by_text("review pending").first.wait_for(timeout=30_000)
    assert_no_exception(page)
    page.locator("[data-testid=stSidebar]").get_by_role("button", name="Sign out").click()
    settle(page)

    sign_in(page, service_console_url, keys["bo"], "Bo (bo@example.com)")
    go(page, "Changes (1)")
    page.get_by_text("Triage two ran in staging").first.wait_for(timeout=60_000)
    page.get_by_role("textbox", name="Comment").fill("Soaked well")
    page.get_by_role("button", name="Approve").click()
    page.get_by_text("Approved and applied").wait_for(timeout=60_000)
    assert_no_exception(page)
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as admin:
        (applied,) = admin.change_requests.list().items
        job = wait_for_end(admin, applied.result["jobId"])
    assert job.status == "complete" and [(a.stable_key, a.version) for a in job.agents] == [("triage", 2)]

    table = promotion_tab(page)
    settle(page)
    row = table.locator("tr", has_text="triage").last
    assert "v2 waiting" not in table.inner_text()
    assert row.locator("td").nth(2).inner_text().startswith("v2 · since")
    assert_no_exception(page)


def test_an_operator_promotes_one_of_two_waiting_agents_and_the_other_keeps_waiting(
    page, service_console_url, server, org
):
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as admin:
        staging = admin.environments.create("staging").id
        production = admin.environments.create("production").id
        admin.environments.update(production, promotes_from=staging)
        for key in ("triage", "kb-answerer"):
            versioned_agent(admin, key)
            assert wait_for_end(admin, admin.deployments.deploy(staging, [key]).id).status == "complete"
        member = admin.members.create("cy@example.com", "Cy", "operator")
        key = admin.api_keys.create("cy-browser", member_id=member.id).key

    sign_in(page, service_console_url, key, "Cy (cy@example.com)")
    promotion_tab(page).get_by_text("v1 waiting").first.wait_for(timeout=30_000)
    page.get_by_role("button", name="Promote to production").click()
    page.get_by_text("Promote 2 agent(s) from").wait_for(timeout=60_000)
    page.locator("[data-testid=stMultiSelect]").get_by_role("button", name="Remove kb-answerer v1").click()
    page.get_by_text("Promote 1 agent(s) from").wait_for(timeout=60_000)
    assert_no_exception(page)
    shoot(page, "promotion-choice")
    page.get_by_role("button", name="Promote now to production").click()
    page.get_by_text("Promotion to production started").wait_for(timeout=60_000)
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as admin:
        job = admin.deployments.jobs(environment_id=production, limit=1).items[0]
        assert wait_for_end(admin, job.id).status == "complete"
    assert [(a.stable_key, a.version) for a in job.agents] == [("triage", 1)]

    table = promotion_tab(page)  # away to the menu and back, as after any promotion
    row = table.locator("tr", has_text="kb-answerer").last
    assert (
        "v1 waiting" in row.inner_text()
        and "v1 waiting" not in table.locator("tr", has_text="triage").last.inner_text()
    )
    assert_no_exception(page)

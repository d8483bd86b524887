"""A reviewed deployment in headless Chromium: one member requests it on the Deployments page of
their console, another finds it on the Overview of theirs, approves it, and the job runs; the job
and Activity name them both."""

from __future__ import annotations

import pytest

from api import OrgdeckClient
from tests.browser.conftest import (
    assert_no_exception,
    choose,
    click_row,
    grid_cells,
    open_page,
    running_console,
    settle,
    shoot,
)
from tests.test_deployments import versioned_agent, wait_for_end

pytestmark = pytest.mark.browser


def test_request_in_one_console_approve_in_another_and_the_job_completes(
    page, server, org, tmp_path, database_url
):
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as admin:
        versioned_agent(admin, "triage")
        production = admin.environments.create("production")
        admin.environments.update(production.id, protected=True)
        keys = {}
        for name in ("ana", "bo"):
            member = admin.members.create(f"{name}@example.com", name.title(), "operator")
            keys[name] = admin.api_keys.create(f"{name}-key", member_id=member.id).key

    with running_console(tmp_path / "ana", database_url, server.url, keys["ana"]) as ana:
        open_page(page, ana, "deployments", "Deployments")
        page.get_by_role("tab", name="Deploy").click()
        choose(page.locator("[data-testid=stMain]"), "Agents", "triage · v1")
        page.get_by_role("button", name="Preview changes").click()
        page.get_by_text("production is protected").wait_for(timeout=60_000)
        assert page.get_by_role("button", name="Deploy to production").count() == 0
        page.get_by_role("textbox", name="Reason").fill("First release")
        page.get_by_role("textbox", name="Reason").press("Enter")
        page.get_by_role("button", name="Request deployment to production").click()
        page.get_by_text("Requested the deployment to").wait_for(timeout=60_000)
        assert_no_exception(page)

    with running_console(tmp_path / "bo", database_url, server.url, keys["bo"]) as bo:
        # The first page bo opens tells him, and the menu counts it.
        open_page(page, bo, "", "waits for your review")
        page.locator("[data-testid=stSidebar]").get_by_text("Changes (1)").wait_for(timeout=30_000)
        shoot(page, "overview-awaiting-review")
        page.get_by_role("link", name="Review it").click()
        page.get_by_text("Asked by").first.wait_for(timeout=60_000)
        page.get_by_role("textbox", name="Comment").fill("Looks right")
        page.get_by_role("button", name="Approve").click()
        page.get_by_text("Approved and applied").wait_for(timeout=60_000)
        assert_no_exception(page)
        with OrgdeckClient(server.url, org.key, org_slug=org.slug) as admin:
            (applied,) = admin.change_requests.list().items
            job = wait_for_end(admin, applied.result["jobId"])

        # The job and Activity name both: who asked and who approved.
        both = "asked by ana@example.com, approved by bo@example.com"
        open_page(page, bo, f"deployments?open={job.id}", both)
        settle(page)
        shoot(page, "job-approved-by")
        open_page(page, bo, "activity", "Every change made")
        settle(page)
        cells = grid_cells(page)
        assert "bo@example.com" in cells and "ana@example.com" in cells
        click_row(page, page.locator("[data-testid=stDataFrame]").first, "deployment job")
        page.get_by_text(both).first.wait_for(timeout=60_000)
        assert_no_exception(page)

    assert applied.status == "applied" and applied.approvals[0].comment == "Looks right"
    assert job.status == "complete" and [agent.version for agent in job.agents] == [1]

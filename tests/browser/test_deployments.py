"""The Deployments page in headless Chromium, on the demo organization's quarter of deployments."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import func, select

from api import OrgdeckClient
from service.deployments.models import DeploymentJobRow
from service.orgs.models import OrganizationRow
from service.storage.db import Database
from tests.browser.conftest import WIDE, assert_no_exception, go, grid_cells, open_page, settle, shoot
from tests.browser.test_promotion import sign_in
from tests.conftest import wait_for
from tests.test_deployments import versioned_agent

pytestmark = pytest.mark.browser

TILES = (
    "Deployment frequency",
    "Median lead time",
    "Change failure rate",
    "Median job duration",
    "Median time to restore",
)


def wait_for_demo_jobs(db: Database, timeout: float = 60) -> None:
    """Until the demo's own deployments have run: the status matrix shows what they deployed."""
    deadline = time.monotonic() + timeout
    waiting = (
        select(func.count())
        .select_from(DeploymentJobRow)
        .join(OrganizationRow, OrganizationRow.id == DeploymentJobRow.org_id)
        .where(OrganizationRow.slug == "demo", DeploymentJobRow.status.in_(["pending", "running"]))
    )
    while time.monotonic() < deadline:
        with db.session() as session:
            if session.scalar(waiting) == 0:
                return
        time.sleep(0.5)
    raise AssertionError(f"the demo's deployment jobs did not run in {timeout} s")


def test_overview_draws_the_metrics_heatmaps_and_status_matrix(page, console_url, server, db):
    # This console runs no worker; the test service's worker (`server`) runs the demo's jobs.
    open_page(page, console_url, "deployments", "Deployment frequency")
    wait_for_demo_jobs(db)
    open_page(page, console_url, "deployments", *TILES, "Agents by environment", "by weekday and hour")
    charts = page.locator("[data-testid=stPlotlyChart] .js-plotly-plot")
    charts.nth(2).wait_for(timeout=30_000)
    assert charts.count() == 3
    # Cells drawn, not only axes: the two heatmaps and the status matrix each paint a heatmap layer.
    page.locator(".js-plotly-plot .heatmaplayer .hm").nth(2).wait_for(timeout=30_000)
    # The status matrix's legend, and the demo's stale and failing pairs among its cells.
    for state in ("In sync", "Drifted", "Stale", "Error", "Not deployed"):
        assert page.locator(".js-plotly-plot .legendtext", has_text=state).count() == 1
    assert page.get_by_text("Stale **2**").count() == 0  # markdown rendered, not shown raw
    assert page.locator("[data-testid=stMetric]").count() == len(TILES)
    assert page.locator("[data-testid=stException]").count() == 0


def test_a_rollout_is_paused_and_resumed_and_stays_paused_across_pages(
    page, service_console_url, server, org
):
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as admin:
        staging = admin.environments.create("staging").id
        keys = ["triage", "kb-answerer", "summarizer"]
        for key in keys:
            versioned_agent(admin, key)
        job = admin.deployments.deploy(staging, keys, strategy={"waveSize": 1, "pauseSeconds": 600})
        wait_for(lambda: admin.deployments.job(job.id).rollout.current_wave == 1, 30, "wave 1 done")
        member = admin.members.create("ops@example.com", "Ops", "operator")
        key = admin.api_keys.create("ops-browser", member_id=member.id).key

    sign_in(page, service_console_url, key, "Ops (ops@example.com)")
    jobs_tab(page)
    page.get_by_text("Next wave in").wait_for(timeout=30_000)
    assert_no_exception(page)
    shoot(page, "deployments-rollout", widths=(WIDE,))
    page.get_by_role("button", name="Pause").click()
    page.get_by_text("Paused by").wait_for(timeout=60_000)

    go(page, "Environments")  # away and back: still paused, nothing moved meanwhile
    jobs_tab(page)
    page.get_by_text("Paused by").wait_for(timeout=60_000)
    page.get_by_role("button", name="Resume").click()
    page.get_by_text("Resumed the rollout").wait_for(timeout=60_000)
    assert_no_exception(page)
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as admin:
        assert admin.deployments.job(job.id).status in ("pending", "running")
        admin.deployments.abort(job.id)  # leave no rollout waiting ten minutes


def test_the_jobs_tab_follows_a_rollout_to_its_end_without_a_click(page, service_console_url, server, org):
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as admin:
        staging = admin.environments.create("staging").id
        keys = ["triage", "kb-answerer", "summarizer"]
        for key in keys:
            versioned_agent(admin, key)
        member = admin.members.create("watcher@example.com", "Watcher", "viewer")
        key = admin.api_keys.create("watcher-browser", member_id=member.id).key
        job = admin.deployments.deploy(staging, keys, strategy={"waveSize": 1, "pauseSeconds": 8})

    sign_in(page, service_console_url, key, "Watcher (watcher@example.com)")
    jobs_tab(page)
    page.get_by_text("Next wave in").wait_for(timeout=30_000)  # opened while the waves go on
    # From here no click: the job's card reads it again until it ends, then the tab is redrawn (the
    # table's row too).
    page.get_by_test_id("stAlertContentSuccess").get_by_text("Deployed 3 agents").wait_for(timeout=60_000)
    assert "Deployed 3 agents" in grid_cells(page)
    assert_no_exception(page)
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as admin:
        assert admin.deployments.job(job.id).status == "complete"


def jobs_tab(page) -> None:
    go(page, "Deployments")
    page.get_by_role("tab", name="Jobs").click()
    settle(page)
    page.get_by_text("Rollout:").wait_for(timeout=60_000)

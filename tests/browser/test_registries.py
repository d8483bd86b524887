"""The prompt registries page as a person sees it, on the demo organization."""

from __future__ import annotations

import pytest

from tests.browser.conftest import click_row, grid_cells, open_page, shoot

pytestmark = pytest.mark.browser


def open_triage_prompt(page, console_url: str) -> None:
    open_page(page, console_url, "registries", "Prompt registries", "New registry")
    click_row(page, page.locator("[data-testid=stDataFrame]").first, "demo/support-prompts")
    page.locator("[data-testid=stRadio]").get_by_text("triage-system").click()
    # Production of triage-system is 1.1.0: that is what the content view opens on.
    page.get_by_text("Add refunds and priorities").first.wait_for(timeout=30_000)


def test_artifact_browser_shows_the_demo_prompts(page, console_url):
    open_page(page, console_url, "registries", "Prompt registries", "New registry")
    assert {"demo/support-prompts", "demo/shared-prompts", "public", "private"} <= set(grid_cells(page))
    open_triage_prompt(page, console_url)
    assert page.locator("mark", has_text="{{company}}").first.is_visible()


def test_compare_tab_shows_a_side_by_side_diff(page, console_url):
    open_triage_prompt(page, console_url)
    page.get_by_role("tab", name="Compare").click()
    # Until the rerun for the chosen artifact ends, the previous artifact's diff may still be shown.
    diff = page.locator("[data-testid=stHtml]", has_text="Version 2.0.0").first
    diff.wait_for(timeout=30_000)
    assert "Version 1.1.0" in diff.inner_text()
    assert "Enterprise customers are never below P2." in diff.inner_text()
    assert page.get_by_text("lines added").first.is_visible()
    shoot(page, "registries-diff")


def test_versions_tab_charts_publications_and_labels(page, console_url):
    open_triage_prompt(page, console_url)
    page.get_by_role("tab", name="Versions").click()
    page.locator("[data-testid=stPlotlyChart]").first.wait_for(timeout=30_000)
    shoot(page, "registries-versions")
    cells = set(grid_cells(page))
    assert {"2.0.0", "1.1.0", "1.0.0", "latest, staging", "production"} <= cells, cells

"""The prompt registries page as a person sees it, on the demo organization."""

from __future__ import annotations

import pytest

from tests.browser.conftest import choose, click_row, form_with, grid_cells, open_page, settle, shoot, submit

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


def shown(box) -> str:
    """What a select box shows as chosen: as text, or as its input's value while it can be typed in."""
    values = [field.input_value() for field in box.locator("input").all()]
    return " ".join([box.inner_text(), *values])


def version_picker(page):
    form = form_with(page, "Move label").first
    return form.locator("[data-testid=stSelectbox]").filter(has=page.get_by_text("Version", exact=True))


def test_the_version_picker_shows_a_moved_label(page, console_url):
    open_triage_prompt(page, console_url)
    page.get_by_role("tab", name="Labels").click()
    settle(page)
    form_with(page, "Move label").first.get_by_role("textbox", name="Or a new label").fill("canary")
    choose(form_with(page, "Move label"), "Version", "1.0.0")
    submit(page, "Move label")
    page.get_by_text("Moved canary").first.wait_for(timeout=30_000)
    settle(page)
    assert "1.0.0 · canary" in shown(version_picker(page))


def test_escape_in_the_move_form_keeps_the_chosen_label(page, console_url):
    open_triage_prompt(page, console_url)
    page.get_by_role("tab", name="Labels").click()
    settle(page)
    staging = form_with(page, "Move label").first.get_by_role("radio", name="staging")
    staging.check(force=True)  # the radio's input is drawn over by its label
    settle(page)
    page.keyboard.press("Escape")
    settle(page)
    assert staging.is_checked()


def test_the_publish_tab_stays_open_after_publish(page, console_url):
    open_triage_prompt(page, console_url)
    page.get_by_role("tab", name="Publish").click()
    settle(page)
    form = form_with(page, "Publish").first
    form.get_by_role("textbox", name="Prompt").fill("Triage the ticket for {{company}}, briefly.")
    form.get_by_role("textbox", name="Commit message").fill("Shorter")
    submit(page, "Publish")
    page.get_by_text("Published").first.wait_for(timeout=30_000)
    settle(page)
    assert page.get_by_role("tab", name="Publish").get_attribute("aria-selected") == "true"

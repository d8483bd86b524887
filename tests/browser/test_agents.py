"""The Agents and Fleets pages in headless Chromium, on the demo organization."""

from __future__ import annotations

import pytest

from service.agents.demo import DEMO_AGENTS, DEMO_FLEETS
from tests.browser.conftest import grid_cells, open_page

pytestmark = pytest.mark.browser


def test_agents_page_shows_the_catalogue_and_a_version_diff(page, console_url, screenshot_dir):
    page.set_viewport_size({"width": 1440, "height": 2200})  # the console scrolls inside; show it all
    open_page(page, console_url, "agents", "Snapshot version", "Tags (all must match)")
    cells = grid_cells(page)
    assert {agent.stable_key for agent in DEMO_AGENTS} <= set(cells)
    assert set(DEMO_FLEETS) & set(cells)
    page.get_by_role("tab", name="Compare").click()
    page.get_by_text("line(s) removed").first.wait_for(timeout=30_000)
    page.screenshot(path=str(screenshot_dir / "agents.png"), full_page=True)
    assert (screenshot_dir / "agents.png").stat().st_size > 10_000


def test_fleets_page_shows_fleets_and_their_agents(page, console_url, screenshot_dir):
    open_page(page, console_url, "fleets", "Agents in", "New fleet")
    cells = grid_cells(page)
    assert set(DEMO_FLEETS) <= set(cells)
    page.locator(".js-plotly-plot").first.wait_for(timeout=30_000)
    page.screenshot(path=str(screenshot_dir / "fleets.png"), full_page=True)
    assert (screenshot_dir / "fleets.png").stat().st_size > 10_000

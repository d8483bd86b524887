"""The Agents and Fleets pages in headless Chromium, on the demo organization."""

from __future__ import annotations

import pytest

from service.agents.demo import DEMO_AGENTS, DEMO_FLEETS
from tests.browser.conftest import grid_cells, open_page, shoot

pytestmark = pytest.mark.browser


def test_agents_page_shows_the_catalogue_and_a_version_diff(page, console_url):
    open_page(page, console_url, "agents", "Snapshot version", "Tags (all must match)")
    cells = grid_cells(page)
    assert {agent.stable_key for agent in DEMO_AGENTS} <= set(cells)
    assert set(DEMO_FLEETS) & set(cells)
    page.get_by_role("tab", name="Compare").click()
    page.get_by_text("line(s) removed").first.wait_for(timeout=30_000)
    shoot(page, "agents-compare")


def test_fleets_page_shows_fleets_and_their_agents(page, console_url):
    open_page(page, console_url, "fleets", "Agents in", "New fleet")
    cells = grid_cells(page)
    assert set(DEMO_FLEETS) <= set(cells)
    page.locator(".js-plotly-plot").first.wait_for(timeout=30_000)

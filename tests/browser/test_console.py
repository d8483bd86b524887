"""The console as a person sees it, in headless Chromium."""

from __future__ import annotations

import pytest

from tests.browser.conftest import grid_cells, open_page

pytestmark = pytest.mark.browser


def test_first_run_shows_the_demo_org(page, console_url, screenshot_dir):
    open_page(page, console_url, "", "Active API keys")
    assert page.get_by_text("Demo Organization").first.is_visible()
    assert page.get_by_text("embedded demo service").first.is_visible()
    page.screenshot(path=str(screenshot_dir / "overview.png"), full_page=True)
    assert (screenshot_dir / "overview.png").stat().st_size > 10_000


def test_api_keys_page_lists_the_demo_keys(page, console_url, screenshot_dir):
    open_page(page, console_url, "api_keys", "New key name", "Revoke a key")
    cells = grid_cells(page)
    assert {"console", "ci-pipeline", "grafana-exporter"} <= set(cells)
    page.screenshot(path=str(screenshot_dir / "api-keys.png"), full_page=True)

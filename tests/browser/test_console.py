"""The console as a person sees it, in headless Chromium."""

from __future__ import annotations

import pytest

from tests.browser.conftest import grid_cells, open_page

pytestmark = pytest.mark.browser


def test_first_run_shows_the_demo_org_and_says_it_is_demo_data(page, console_url):
    open_page(page, console_url, "", "What needs attention")
    assert page.get_by_text("Demo Organization").first.is_visible()
    assert page.get_by_text("embedded demo service").first.is_visible()
    assert page.get_by_text("This is demo data.").first.is_visible()


def test_api_keys_page_lists_the_demo_keys(page, console_url):
    open_page(page, console_url, "api_keys", "New key name")
    cells = grid_cells(page)
    assert {"console", "ci-pipeline", "grafana-exporter"} <= set(cells)

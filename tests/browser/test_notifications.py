"""The Notifications page in headless Chromium, on the demo organization's month of deliveries."""

from __future__ import annotations

import pytest

from service.notifications.demo import DEMO_CHANNELS
from tests.browser.conftest import grid_cells, open_page

pytestmark = pytest.mark.browser


def test_notifications_page_shows_the_log_with_charts(page, console_url):
    open_page(page, console_url, "notifications", "Failure rate per channel", "Delivery log")
    charts = page.locator("[data-testid=stPlotlyChart] .js-plotly-plot")
    charts.nth(1).wait_for(timeout=30_000)
    assert charts.count() == 2
    # Bars drawn, not only axes: one stacked series per status, and a bar per demo channel.
    assert page.locator(".js-plotly-plot .barlayer .trace").count() >= 4
    assert page.get_by_text("1 delivery dead").first.is_visible()
    cells = grid_cells(page)
    assert set(DEMO_CHANNELS) & set(cells)
    # Newest first: the month's history, or live deliveries failing against the demo's dead address.
    assert {"sent", "failed"} & set(cells)
    assert page.locator("[data-testid=stException]").count() == 0
